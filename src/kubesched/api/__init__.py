"""Kubernetes API machinery that every layer may use: quantities and the validation rules of names,
labels and resources (upstream ``k8s.io/apimachinery``). Pure: no I/O, no kubesched imports above it."""
