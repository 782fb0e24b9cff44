"""moto's S3 server as the tests run it: ``python tests/moto_server.py -H HOST -p PORT``.

The same server as ``python -m moto.server``, less three costs moto pays on
every request that no real object store has (on this machine, creating a
lake on it took 236 ms before and 140 ms after; a session's first six
statements 1.16 s and 0.86 s):

- moto lists its own package directory (an ``isdir`` per service, ~200) to
  route each request; the list never changes while the server runs, so it
  is read once;
- werkzeug logs every request line (to a stream the tests discard);
- the response's headers and body leave in separate small writes with
  Nagle's algorithm on, so the second can wait for the client's delayed ACK.

Nothing of S3's behaviour changes: requests are parsed, routed and answered
by moto's own code (conditional puts included).
"""

from __future__ import annotations

import logging
import sys

from moto import backends
from moto.moto_server.werkzeug_app import MotoRequestHandler
from moto.server import main

_MODULES = tuple(backends.list_of_moto_modules())
backends.list_of_moto_modules = lambda: _MODULES
MotoRequestHandler.disable_nagle_algorithm = True
logging.getLogger("werkzeug").setLevel(logging.WARNING)

if __name__ == "__main__":
    main(sys.argv[1:])
