"""kafka-python's KafkaAdminClient on a queen node's ACLs, driven by
e2e/kafka/acl_kafka_python_test.go, which checks what this prints and what
the HTTP admin route sees between phases.
Usage: python3 acls.py <broker> <jwt> create|describe|delete

Logs in over SASL PLAIN with the broker JWT given (the super user's) as
the password: the same principal, User:<sub>, as the token gets over
OAUTHBEARER or HTTP. (kafka-python 2.0 sends SaslHandshake v0 only, after
which queen takes PLAIN alone.)
create: three bindings for User:py; prints {"succeeded": n, "failed": m}.
describe: every binding of User:py, one JSON line each.
delete: every TOPIC binding of User:py; one JSON line per binding deleted.
"""
import json
import sys

from kafka import KafkaAdminClient
from kafka.admin import (ACL, ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType,
                         ResourcePattern, ResourcePatternFilter, ResourceType)

broker, token, phase = sys.argv[1], sys.argv[2], sys.argv[3]
PRINCIPAL = "User:py"


def row(acl):
    p = acl.resource_pattern
    return {"resourceType": p.resource_type.name, "name": p.resource_name, "pattern": p.pattern_type.name,
            "operation": acl.operation.name, "permission": acl.permission_type.name,
            "principal": acl.principal, "host": acl.host}


admin = KafkaAdminClient(bootstrap_servers=broker, client_id="e2e-kafka-python-acls",
                         security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                         sasl_plain_username="root", sasl_plain_password=token, request_timeout_ms=30000)
try:
    if phase == "create":
        acls = [
            ACL(PRINCIPAL, "*", ACLOperation.READ, ACLPermissionType.ALLOW,
                ResourcePattern(ResourceType.TOPIC, "py.", ACLResourcePatternType.PREFIXED)),
            ACL(PRINCIPAL, "*", ACLOperation.WRITE, ACLPermissionType.ALLOW,
                ResourcePattern(ResourceType.TOPIC, "py.orders", ACLResourcePatternType.LITERAL)),
            ACL(PRINCIPAL, "*", ACLOperation.READ, ACLPermissionType.DENY,
                ResourcePattern(ResourceType.GROUP, "py-g", ACLResourcePatternType.LITERAL)),
        ]
        res = admin.create_acls(acls)
        for acl in res["failed"]:
            print(repr(acl), file=sys.stderr)
        print(json.dumps({"succeeded": str(len(res["succeeded"])), "failed": str(len(res["failed"]))}))
    elif phase == "describe":
        found, err = admin.describe_acls(ACLFilter(
            principal=PRINCIPAL, host="*", operation=ACLOperation.ANY, permission_type=ACLPermissionType.ANY,
            resource_pattern=ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY)))
        if err.errno != 0:
            raise SystemExit(f"describe_acls: {err}")
        for acl in found:
            print(json.dumps(row(acl)))
    elif phase == "delete":
        results = admin.delete_acls([ACLFilter(
            principal=PRINCIPAL, host="*", operation=ACLOperation.ANY, permission_type=ACLPermissionType.ANY,
            resource_pattern=ResourcePatternFilter(ResourceType.TOPIC, None, ACLResourcePatternType.ANY))])
        for _, matched, err in results:
            if err.errno != 0:
                raise SystemExit(f"delete_acls: {err}")
            for acl, acl_err in matched:
                if acl_err.errno != 0:
                    raise SystemExit(f"delete_acls, {acl}: {acl_err}")
                print(json.dumps(row(acl)))
    else:
        raise SystemExit(f"unknown phase {phase}")
finally:
    admin.close()
