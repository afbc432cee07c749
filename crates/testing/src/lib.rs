//! kubesched-testing (under construction).
