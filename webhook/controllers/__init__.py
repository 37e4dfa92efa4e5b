"""The controller role: cluster-wide loops that one process is enough for, kept off the
process that answers AdmissionReviews.

`loop` is the contract every such loop meets (`leading`, `interval`, `pass_once`), `runner`
runs a table of them on ordinary threads, `table` lists dragate's loops from the pieces the
composer (`webhook.assembly`) built, and `probes` answers /healthz, /readyz and /metrics over
plain HTTP. Nothing here starts a thread before it is asked to.
"""
