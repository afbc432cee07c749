//! kubesched-sim (under construction).
