"""`kubectl coldstart`: where each inference pod's cold start went, on any cluster, now.

A kubectl plugin (the `kubectl-coldstart` entry point; `remediator coldstart` too) that lists
the pods and their Events once from the live API with the user's own kubeconfig, feeds the raw
JSON through the same core as `remediator replay` (its Tracker, on its clock), and prints replay's
phase bars, the workload's P50/P95 per phase, and for each pod not Ready yet where it is and
for how long against its siblings. No remediator service, no Prometheus, no write access.

    target.py  what the user named (POD, deploy/NAME, sts/NAME, -l SELECTOR) → a pod query
    kube.py    the API calls (raw JSON, `_preload_content=False`), 403s named by verb/resource
    snapshot.py  one list of pods, Events (both APIs) and, with --logs, engine logs → the Tracker
    report.py  workloads, P50/P95 per phase, where a pod waits against its siblings (pure)
    render.py  text (replay's pod blocks) and JSON (serve's /timelines lines)
    live.py    --watch: watches feeding the same Tracker, redrawn at most once a second
    cli.py     the command line
"""
