//! Gateway tests: the pure rules (the actor paths are exercised by the scenario tests).
