"""YAML and JSON text: reading manifests within bounds, and `migrate`'s in-place editing that
keeps comments, key order and layout.
"""
