//! Tests of the pointer grammar.
