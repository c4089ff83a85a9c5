"""Jaxprs as trees: `JaxprView`, its scopes and equations, lookups and JSON.

Modules:
    _json: A `JaxprView` as JSON-able data: `view.to_dict()` and `treetool ... --json`.
    _scope: The parts of a jaxpr tree: `Scope` (one jaxpr, the top one or a sub-jaxpr) and `Equation`.
    _uses: Lookups on a `JaxprView`: variables by name or path, equations by id, uses and producers.
    _view: Jaxprs as trees: equations with nested sub-jaxprs, tied back to the pytrees that went in.
"""
