"""The maintenance pass (RFC 0021): options, steps, status window, triggers.

So far: the options and their bind-time validation (``options``). The pass
itself, the status window, single flight and the scheduler are issue 4's
remaining work.
"""
