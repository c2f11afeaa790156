"""trainstack's CrossGuard policy pack: `pulumi preview --policy-pack policy`.

Every rule lives in rules/ as a plain function (tested without the policy engine); this file only
adapts them to pulumi-policy. The stack's config and name come from the environment the Pulumi CLI
gives a policy pack (PULUMI_CONFIG, PULUMI_STACK).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from functools import cache

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    PolicyPack,
    ResourceValidationPolicy,
    StackValidationPolicy,
)
from rules import RULES, Rule
from rules.common import Resource, Stack, provider_setting

# Where providers keep the tags/labels they add to every resource.
PROVIDER_LABEL_PATHS = (("defaultTags", "tags"), ("defaultLabels",))


@cache
def current_stack() -> Stack:
    return Stack(name=os.environ.get("PULUMI_STACK", ""), config=json.loads(os.environ.get("PULUMI_CONFIG") or "{}"))


def _provider_labels(provider) -> Mapping:
    props = getattr(provider, "props", None) or {}
    for path in PROVIDER_LABEL_PATHS:
        value = props
        for key in path:
            value = provider_setting(value.get(key)) if isinstance(value, Mapping) else None
        if isinstance(value, Mapping):
            return dict(value)
    return {}


def _resource(engine_resource, dependencies: tuple[str, ...] = ()) -> Resource:
    options = engine_resource.opts
    return Resource(type=engine_resource.resource_type, name=engine_resource.name, props=engine_resource.props,
                    options={"protect": options.protect} if options else {}, urn=engine_resource.urn,
                    dependencies=dependencies, provider_labels=_provider_labels(engine_resource.provider))


def _rule_config(rule: Rule, args) -> dict:
    config = args.get_config() or {}
    return {argument: config[key] for key, argument in rule.config if key in config}


def _resource_policy(rule: Rule) -> ResourceValidationPolicy:
    def validate(args, report_violation):
        for message in rule.check(_resource(args), current_stack(), **_rule_config(rule, args)):
            report_violation(message)
    return ResourceValidationPolicy(name=rule.name, description=rule.reason, validate=validate,
                                    enforcement_level=EnforcementLevel(rule.level),
                                    config_schema=_config_schema(rule))


def _stack_policy(rule: Rule) -> StackValidationPolicy:
    def validate(args, report_violation):
        resources = []
        for r in args.resources:
            dependencies = {d.urn for d in r.dependencies}
            dependencies |= {d.urn for deps in r.property_dependencies.values() for d in deps}
            resources.append(_resource(r, tuple(sorted(dependencies))))
        for resource, message in rule.check(resources, current_stack(), **_rule_config(rule, args)):
            report_violation(message, resource.urn if resource else None)
    return StackValidationPolicy(name=rule.name, description=rule.reason, validate=validate,
                                 enforcement_level=EnforcementLevel(rule.level), config_schema=_config_schema(rule))


def _config_schema(rule: Rule) -> PolicyConfigSchema | None:
    if not rule.config:
        return None
    return PolicyConfigSchema(properties={key: {"type": "array", "items": {"type": "string"}} for key, _ in rule.config})


def policies() -> list:
    return [_stack_policy(rule) if rule.scope == "stack" else _resource_policy(rule) for rule in RULES]


PolicyPack(name="trainstack", policies=policies())
