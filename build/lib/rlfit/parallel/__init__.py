"""Several devices and machines: how a run lies on a device mesh, and the processes of one run."""
