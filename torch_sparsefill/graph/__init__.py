"""Reserved for the graph domain: the indefinite fill (an unspecified element
is a non-edge, with no value) and semiring products. Nothing lives here yet."""
