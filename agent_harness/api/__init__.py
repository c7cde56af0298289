"""`agent-harness serve`: the documented HTTP API a host watches and drives the fleet through.

`app.create_app` builds the FastAPI application; `guard` refuses what must never reach a route
(no token, a body too large); `errors` maps the library's errors to statuses; `schemas` holds
every request and answer; one router module per area (`service`, `projects`, `work`, `plan`,
`operations`) calls library functions and returns those models, and holds no logic of its own.
"""
