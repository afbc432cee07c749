//! kubesched-scheduler (under construction).
