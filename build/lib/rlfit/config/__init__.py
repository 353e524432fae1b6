"""The run configuration: typed frozen sections, their rules, values, documentation and the algorithms rlfit knows."""
