"""API models: resource.k8s.io/v1, the core/v1 parts DRA reads, admission.k8s.io/v1, Quantity.

The bottom layer: imports nothing else of draguard's.
"""
