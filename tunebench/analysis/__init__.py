"""Analysis reads only the run store: frames -> compare / plots -> report."""
