//! kubesched-config (under construction).
