//! Tests of validation.
