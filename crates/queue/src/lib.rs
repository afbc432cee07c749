//! kubesched-queue (under construction).
