"""The HTTP routes, one module per group, each a `router` whose routes get the Service as a dependency
(`ServiceDep`). `create_app` includes each router with the token its group needs; a new group is a new
module here and one `include_router` line there."""
