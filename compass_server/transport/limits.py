"""The HTTP transport's defaults, apart from its (heavy) server code so that
the settings can name them cheaply."""

# An answer given before the request body was read: the rest of the body is
# read and dropped when at most this much is left, so the connection serves
# the next request; else the answer closes the connection.
DRAIN_BYTES = 1 << 20
DRAIN_SECONDS = 5.0
# An idle connection is kept this long for its next request: longer than
# clients' pools keep one (hyper and Go: 90 s), so that a client never sends
# on a connection the server is closing, which fails a call never refused.
IDLE_SECONDS = 120.0
# A Connect unary answer smaller than this goes uncompressed whatever the
# client accepts: gzip costs more server CPU than the bytes it saves.
COMPRESS_MIN_BYTES = 1024
