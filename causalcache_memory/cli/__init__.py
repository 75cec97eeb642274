"""The ``causalcache`` command line (subcommands register themselves from ``cli/<name>.py``)."""
