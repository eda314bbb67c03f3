"""What a user writes: the checks' parameter types and models, the deployments of a campaign file, and
the redaction of secrets in what ctxbench records of them."""
