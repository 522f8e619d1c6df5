"""What a ``load: staging`` swap carries over from the target to the table swapped in (docs/manual/postgres.md):
its owner, grants, row-level security, triggers and foreign keys, read in the commit's transaction before the
DROP and given back right after the RENAME; :meth:`Kept.check` refuses at prepare what the user could not
recreate."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg

from wormhole.errors import CommitError, PrepareError
from wormhole.plugins.sql import quote
from wormhole.plugins.sql.target import TargetSql

Grant = tuple[str, str | None, str, str, bool]
"""``(column or '', grantee or None for PUBLIC, grantor, privilege, with grant option)``."""

_ACL = ("SELECT '', CASE WHEN x.grantee = 0 THEN NULL ELSE pg_get_userbyid(x.grantee) END, "
        "pg_get_userbyid(x.grantor), x.privilege_type, x.is_grantable FROM pg_class c, "
        "aclexplode(coalesce(c.relacl, acldefault('r', c.relowner))) x WHERE c.oid = to_regclass(%(t)s) "
        "UNION ALL SELECT a.attname, CASE WHEN x.grantee = 0 THEN NULL ELSE pg_get_userbyid(x.grantee) END, "
        "pg_get_userbyid(x.grantor), x.privilege_type, x.is_grantable FROM pg_attribute a, aclexplode(a.attacl) x "
        "WHERE a.attrelid = to_regclass(%(t)s) AND a.attnum > 0 AND NOT a.attisdropped")
_POLICY_CMD = {"r": "SELECT", "a": "INSERT", "w": "UPDATE", "d": "DELETE", "*": "ALL"}
_TRIGGER_STATE = {"D": "DISABLE TRIGGER", "R": "ENABLE REPLICA TRIGGER", "A": "ENABLE ALWAYS TRIGGER"}
"""``pg_trigger.tgenabled`` other than ``O`` (enabled, as CREATE TRIGGER makes it)."""


@dataclass(frozen=True, slots=True)
class Kept:
    """The target's owner, grants, row-level security and triggers."""

    owner: str
    grants: frozenset[Grant]
    row_security: tuple[bool, bool]
    """(enabled, forced)."""
    policies: tuple[str, ...]
    """Each policy's CREATE POLICY, on the target's name."""
    triggers: tuple[tuple[str, str, str], ...]
    """(name, its CREATE TRIGGER as ``pg_get_triggerdef`` gives it, ``tgenabled``)."""
    foreign_keys: tuple[tuple[str, str], ...] = ()
    """(name, its definition as ``pg_get_constraintdef`` gives it) of each foreign key the target declares."""

    def check(self, sql: TargetSql, conn: psycopg.Connection[Any], target: str) -> None:
        """At prepare: refuse the swap of ``target`` where the connected user could not keep all of it."""
        user, superuser = _user(conn)
        if not superuser and user != self.owner:
            member, can_own = conn.execute(
                "SELECT pg_has_role(current_user, %s, 'USAGE'), has_schema_privilege(%s, %s, 'CREATE')",
                (self.owner, self.owner, sql.namespace)).fetchone() or (False, False)
            if not member:
                raise sql.error(PrepareError, f"load 'staging' replaces {target}, owned by {self.owner!r}: the user "
                                              f"{user!r} is neither that role nor a member of it, so it can neither "
                                              f"drop the target nor give the table swapped in that owner; nothing "
                                              f"was loaded (use load 'truncate' or 'append', or connect as the "
                                              f"owner)")
            if not can_own:
                raise sql.error(PrepareError, f"load 'staging' replaces {target}, owned by {self.owner!r}, which has "
                                              f"no CREATE privilege on schema {sql.namespace!r}, so the table swapped "
                                              f"in cannot be given that owner; nothing was loaded (use load "
                                              f"'truncate' or 'append')")
        foreign = sorted({_grant_text(g) for g in self.grants if g[2] != self.owner}, key=str)
        if foreign:
            raise sql.error(PrepareError, f"load 'staging' replaces {target}, whose grants {', '.join(foreign)} "
                                          f"were made by a role other than its owner {self.owner!r}; the swap "
                                          f"would have to make them again as that role, which it does not, so "
                                          f"nothing was loaded (use load 'truncate' or 'append', or have the "
                                          f"owner make those grants)")

    def apply(self, sql: TargetSql, conn: psycopg.Connection[Any], target: str) -> None:
        """Right after the RENAME (``target`` names the swapped-in table), in the commit's transaction."""
        if read_owner(conn, target) != self.owner:
            conn.execute(f"ALTER TABLE {target} OWNER TO {quote(self.owner)}")
        have = read_grants(conn, target)
        for column, grantee, _, privilege, _ in sorted(have - self.grants, key=str):  # the schema's default privileges
            conn.execute(f"REVOKE {privilege}{_columns(column)} ON {target} FROM {_role(grantee)}")
        for column, grantee, _, privilege, grantable in sorted(self.grants - have, key=str):
            conn.execute(f"GRANT {privilege}{_columns(column)} ON {target} TO {_role(grantee)}"
                         + (" WITH GRANT OPTION" if grantable else ""))
        enabled, forced = self.row_security
        if enabled:
            conn.execute(f"ALTER TABLE {target} ENABLE ROW LEVEL SECURITY")
        if forced:
            conn.execute(f"ALTER TABLE {target} FORCE ROW LEVEL SECURITY")
        for policy in self.policies:
            conn.execute(policy.encode())
        for name, definition, state in self.triggers:
            conn.execute(definition.encode())  # names the target: the swapped-in table now
            if state in _TRIGGER_STATE:
                conn.execute(f"ALTER TABLE {target} {_TRIGGER_STATE[state]} {quote(name)}")
        for name, definition in self.foreign_keys:  # checks the loaded rows (unless the key is NOT VALID)
            conn.execute(f"ALTER TABLE {target} ADD CONSTRAINT {quote(name)} {definition}".encode())
        missing = self.grants ^ read_grants(conn, target)
        if missing:  # a grant recorded otherwise than asked: the commit (and its swap) is undone
            raise sql.error(CommitError, f"the grants of {target} could not be kept by the staging swap (differing: "
                                         f"{', '.join(sorted(_grant_text(g) for g in missing))}); the swap is undone")


def read_kept(conn: psycopg.Connection[Any], target: str) -> Kept:
    """What ``target`` (a quoted, qualified name) holds that a table made LIKE it would not."""
    found = conn.execute("SELECT relrowsecurity, relforcerowsecurity FROM pg_class WHERE oid = to_regclass(%s)",
                         (target,)).fetchone() or (False, False)
    policies = conn.execute(
        "SELECT p.polname, p.polpermissive, p.polcmd, array(SELECT CASE WHEN r = 0 THEN 'PUBLIC' ELSE "
        "quote_ident(pg_get_userbyid(r)) END FROM unnest(p.polroles) r), pg_get_expr(p.polqual, p.polrelid), "
        "pg_get_expr(p.polwithcheck, p.polrelid) FROM pg_policy p WHERE p.polrelid = to_regclass(%s) "
        "ORDER BY p.polname", (target,)).fetchall()
    triggers = conn.execute("SELECT tgname, pg_get_triggerdef(oid), tgenabled FROM pg_trigger WHERE tgrelid = "
                            "to_regclass(%s) AND NOT tgisinternal ORDER BY tgname", (target,)).fetchall()
    keys = conn.execute("SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = "
                        "to_regclass(%s) AND contype = 'f' ORDER BY conname", (target,)).fetchall()
    return Kept(owner=read_owner(conn, target), grants=read_grants(conn, target),
                row_security=(bool(found[0]), bool(found[1])),
                policies=tuple(_policy(target, *p) for p in policies),
                triggers=tuple((str(n), str(d), str(s)) for n, d, s in triggers),
                foreign_keys=tuple((str(n), str(d)) for n, d in keys))


def read_owner(conn: psycopg.Connection[Any], table: str) -> str:
    found = conn.execute("SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = to_regclass(%s)",
                         (table,)).fetchone()
    return str(found[0]) if found else ""


def read_grants(conn: psycopg.Connection[Any], table: str) -> frozenset[Grant]:
    """Table privileges (no ACL: the owner's defaults, spelled out) and column privileges of ``table``."""
    return frozenset((str(c), None if g is None else str(g), str(by), str(p), bool(o))
                     for c, g, by, p, o in conn.execute(_ACL, {"t": table}).fetchall())


def _user(conn: psycopg.Connection[Any]) -> tuple[str, bool]:
    found = conn.execute("SELECT current_user, rolsuper FROM pg_roles WHERE rolname = current_user").fetchone()
    return (str(found[0]), bool(found[1])) if found else ("", False)


def _policy(target: str, name: str, permissive: bool, cmd: str, roles: list[str], using: str | None,
            check: str | None) -> str:
    return (f"CREATE POLICY {quote(name)} ON {target} AS {'PERMISSIVE' if permissive else 'RESTRICTIVE'} "
            f"FOR {_POLICY_CMD[cmd]} TO {', '.join(roles)}" + (f" USING ({using})" if using is not None else "")
            + (f" WITH CHECK ({check})" if check is not None else ""))


def _role(grantee: str | None) -> str:
    return "PUBLIC" if grantee is None else quote(grantee)


def _columns(column: str) -> str:
    return f" ({quote(column)})" if column else ""


def _grant_text(grant: Grant) -> str:
    column, grantee, grantor, privilege, grantable = grant
    return (f"{privilege}{_columns(column)} to {grantee or 'PUBLIC'}{' WITH GRANT OPTION' if grantable else ''} "
            f"by {grantor}")
