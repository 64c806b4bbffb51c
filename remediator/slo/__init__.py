"""`remediator slo-report`: cold-start SLOs over a window, read back from Prometheus."""
