"""The run directory on disk: its layout, its lock and files written whole (atomically) or refused in one line."""
