"""Kubernetes I/O shared by the live scheduler and the extender: the API client (connection from
the maintained kubeconfig loaders, rate limiter), list+watch informers and the event recorder."""
