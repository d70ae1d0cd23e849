"""Adapters between host agent frameworks and the goldfive core.

``callable`` needs nothing extra; ``claude`` needs ``pip install 'goldfive[claude]'``
and imports the SDK only when used.
"""
