"""What every part of the report names and colours the same way."""
LABEL = {"read": "seq read", "write": "seq write", "randread": "rand read", "randwrite": "rand write"}
COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22"]
