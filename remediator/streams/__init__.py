"""The Kafka runtime: the same core as a Faust app (`remediator worker`) fed by `remediator ingest`.

An edge like `remediator.runtime`: the core never imports this package or Faust.
"""
