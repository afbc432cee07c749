//! kubesched-cache (under construction).
