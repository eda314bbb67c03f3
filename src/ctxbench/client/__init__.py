"""The client: the wire to an OpenAI-compatible server and back (transport, stream parsing, answers).

It records raw stamps and the server's words; it derives nothing (that is `measure`).
"""
