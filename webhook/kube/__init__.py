"""Cluster facts: the Kubernetes API client, watch caches, the template keeper, and the snapshot
file that stands in for a cluster offline.
"""
