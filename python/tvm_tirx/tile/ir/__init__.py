"""What a call is: the PTX table, contracts, the family registry, views and operands."""
