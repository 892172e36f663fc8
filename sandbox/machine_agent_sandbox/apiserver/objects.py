"""The verbs on stored objects: get, list, create, update, patch (merge, JSON, apply) and
delete, with the real server's strategies — status subresource, generation, finalizers
and deletionTimestamp, resourceVersion preconditions, schema validation, managedFields.

Also: dryRun=All (everything but storing), deletecollection, limit/continue, Foreground
deletion (the `foregroundDeletion` finalizer the garbage collector removes). Simplified:
strategic merge patch on built-in kinds is applied as a JSON merge patch (lists are
replaced, not merged by their patchMergeKey).
"""

from __future__ import annotations

import builtins
import copy
import json
import uuid
from typing import Any

import yaml

from . import builtin, decoding, events, pages, patches, ssa
from . import fields as fp
from . import meta as mt
from . import schema as sch
from . import status as st
from .calls import APPLY, FOREGROUND, JSON_PATCH, MERGE, STRATEGIC, Call, Obj, Reply
from .resources import Registry
from .selectors import selector_from_query
from .store import Store

_ACCEPTED = [JSON_PATCH, MERGE, APPLY]
_ACCEPTED_BUILTIN = [JSON_PATCH, MERGE, STRATEGIC, APPLY]
_STANDARD_FINALIZERS = {"kubernetes", "orphan", FOREGROUND}


def _as_sent(new: Obj, sent: Obj | None) -> Obj:
    if not sent:
        return new
    view = {**new, **sent}
    return {k: v for k, v in view.items() if v is not None}


def _zero_value(call: Call) -> Obj:
    """What a typed built-in is before its first write: structs that are not pointers
    always exist (so creating them is no change of their own, only of their fields)."""
    if call.res.storage_id == events.STORAGE_ID:
        return {"deprecatedSource": {}} if call.res.group == events.GROUP else {"source": {}}
    return {}


def _relative_to_status(error: st.FieldError) -> st.FieldError:
    """A /status write validates `status` on its own: the message names the path inside
    it (`conditions[0].type in body ...`), the field stays the full path."""
    if error.field != "status" and not error.field.startswith("status."):
        return error
    inner = error.field.removeprefix("status").removeprefix(".")
    return st.FieldError(error.reason, error.field,
                         error.body.replace(f"{error.field} in body", f"{inner} in body"))


class Objects:
    def __init__(self, store: Store, registry: Registry) -> None:
        self.store = store
        self.registry = registry

    # --- reading -------------------------------------------------------------------

    def output(self, call: Call, obj: Obj) -> Obj:
        out = copy.deepcopy(obj)
        if call.res.storage_id == events.STORAGE_ID:
            out = (events.events_view(out) if call.res.group == events.GROUP
                   else events.core_view(out))
        if call.res.custom and out.get("apiVersion") != call.api_version:
            # conversion None relabels the object; reading it through another version's
            # schema prunes the fields that version does not have, as the real server does
            out = sch.check(out, call.res.schema(call.version)).value
        out["apiVersion"] = call.api_version
        out["kind"] = call.res.kind
        return out

    def _existing(self, call: Call) -> Obj:
        obj = self.store.get(call.res.storage_id, call.namespace, call.name)
        if obj is None:
            raise st.not_found(call.res.gr, call.res.group, call.res.plural, call.name)
        return obj

    def get(self, call: Call) -> Reply:
        if call.query.get("resourceVersion"):
            mt.parse_rv(call.query["resourceVersion"])
        return Reply(200, self.output(call, self._existing(call)))

    def list(self, call: Call) -> Reply:
        """A list as the real server answers it: from the watch cache (resourceVersion
        unset, 0 or NotOlderThan) or, for Exact and paginated reads, as of a revision,
        which is 410 Expired once compacted. A page holds up to `limit` matching objects;
        `continue` goes on after the last key read (matching or not), as etcd paging does.
        Simplified: an Exact read of a revision still kept returns the current objects."""
        query = call.query
        wanted, match = query.get("resourceVersion", ""), query.get("resourceVersionMatch", "")
        if match and not wanted:
            raise st.ApiError(422, "Invalid", 'ListOptions.meta.k8s.io "" is invalid: '
                              "resourceVersionMatch: Forbidden: resourceVersionMatch is "
                              "forbidden unless resourceVersion is provided", {
                                  "group": "meta.k8s.io", "kind": "ListOptions", "causes": [
                                      st.forbidden_field("resourceVersionMatch",
                                                         "resourceVersionMatch is forbidden "
                                                         "unless resourceVersion is provided"
                                                         ).cause()]})
        limit = int(query["limit"]) if query.get("limit", "").isdigit() else 0
        start, token_rv = pages.decode(query.get("continue", ""))
        if wanted:
            rv = mt.parse_rv(wanted)
            exact = match == "Exact" or (limit > 0 and rv > 0)
            if exact and rv < self.store.floor:
                raise st.expired("The resourceVersion for the provided list is too old.")
            if rv > self.store.rv and not self.store.wait_for(rv, 3.0):
                raise st.timeout(f"Too large resource version: {rv}, current: {self.store.rv}",
                                 cause="ResourceVersionTooLarge")
        matches = selector_from_query(query, call.res.id)
        # the stored objects, uncopied: only the page's items are copied (by output)
        objs, rv_now = self.store.view(call.res.storage_id, call.namespace or None)
        page = pages.Page.cut(objs, matches, start, limit, bool(call.namespace))
        list_rv = token_rv or rv_now
        items = [self.output(call, o) for o in page.items]
        if not call.res.custom:
            for item in items:
                item.pop("apiVersion", None)
                item.pop("kind", None)
        meta: Obj = {"resourceVersion": str(list_rv)}
        if call.res.custom or page.next_key:
            # an unstructured list always carries `continue`, empty on the last page
            meta["continue"] = pages.encode(page.next_key, list_rv) if page.next_key else ""
        return Reply(200, {"kind": call.res.list_kind, "apiVersion": call.api_version,
                           "metadata": meta, "items": items})

    def delete_collection(self, call: Call, options: Obj | None) -> Reply:
        """DELETE on a collection: each selected object deleted as DELETE would; the
        answer is the list of what was deleted (or is now terminating)."""
        matches = selector_from_query(call.query, call.res.id)
        objs, _ = self.store.list(call.res.storage_id, call.namespace or None, matches)
        deleted: builtins.list[Obj] = []
        for obj in objs:
            one = Call("delete", call.res, call.version, call.namespace,
                       obj["metadata"]["name"], "", call.query, call.user, call.user_agent)
            try:
                reply = self.delete(one, options)
            except st.ApiError as err:
                if err.code == 404:
                    continue
                raise
            deleted.append(reply.body if reply.body.get("kind") != "Status"
                           else self.output(call, obj))
        meta: Obj = {"resourceVersion": str(self.store.rv)}
        if call.res.custom:
            meta["continue"] = ""
        return Reply(200, {"kind": call.res.list_kind, "apiVersion": call.api_version,
                           "metadata": meta, "items": deleted})

    # --- shared write path -----------------------------------------------------------

    def _check_body(self, call: Call, body: Any) -> Obj:
        if not isinstance(body, dict):
            raise st.bad_request("the object provided is unrecognized (must be a JSON object)")
        kind, api_version = body.get("kind"), body.get("apiVersion")
        if call.res.custom and not kind:
            raise st.bad_request(f"Object 'Kind' is missing in '{json.dumps(body)}'")
        if api_version and api_version != call.api_version:
            raise st.bad_request(f"the API version in the data ({api_version}) does not "
                                 f"match the expected API version ({call.api_version})")
        if kind and kind != call.res.kind and call.res.custom:
            name = str((body.get("metadata") or {}).get("name", ""))
            raise st.invalid_object(str(kind), call.res.group, name, [
                st.invalid("kind", kind, f"must be {call.res.kind}")])
        if kind and kind != call.res.kind:
            raise st.bad_request(f"the kind in the data ({kind}) does not match the "
                                 f"expected kind ({call.res.kind})")
        obj: Obj = copy.deepcopy(body)
        obj.setdefault("metadata", {})
        if not isinstance(obj["metadata"], dict):
            raise st.bad_request("metadata must be an object")
        ns = obj["metadata"].get("namespace")
        if call.res.namespaced and ns and ns != call.namespace:
            raise st.bad_request("the namespace of the provided object does not match the "
                                 "namespace sent on the request")
        return obj

    def _validate(self, call: Call, obj: Obj) -> Obj:
        strictness = call.query.get("fieldValidation", "Warn") or "Warn"
        if strictness not in ("Strict", "Warn", "Ignore"):
            raise st.bad_request(f"fieldValidation must be one of Ignore, Warn or Strict, "
                                 f"got {strictness!r}")
        res = sch.check(obj, call.res.schema(call.version))
        if res.unknown and strictness == "Strict":
            raise st.bad_request(
                f'{call.res.kind} in version "{call.version}" cannot be handled as a '
                f"{call.res.kind}: strict decoding error: " + ", ".join(
                    f'unknown field "{p}"' for p in res.unknown))
        if res.unknown and strictness == "Warn":
            call.warnings.extend(f'unknown field "{p}"' for p in res.unknown)
        name = (obj.get("metadata") or {}).get("name", "")
        errors = [*call.meta_errors, *res.errors]
        if call.verb == "create" and events.is_events_api(call.res.group, call.res.plural):
            errors += events.validate_create(obj)
            if errors:  # named by kind alone, as the real registry names Events
                raise st.invalid_object(call.res.kind, "", name, errors)
        if call.subresource == "status":
            errors = [_relative_to_status(e) for e in errors]
        if errors:
            raise st.invalid_object(call.res.kind, call.res.group, name, errors)
        value: Obj = res.value
        return value

    def _strategy(self, call: Call, old: Obj | None, new: Obj) -> Obj:
        """What a write may change: status only through /status, never server fields."""
        res = call.res
        known = set() if old is None else set(mt.finalizers(old))
        call.warnings.extend(
            f'metadata.finalizers: "{name}": prefer a domain-qualified finalizer name '
            "including a path (/) to avoid accidental conflicts with other finalizer writers"
            for name in mt.finalizers(new) if name not in known and "/" not in name
            and name not in _STANDARD_FINALIZERS)
        if old is None:
            if res.status_subresource:
                new.pop("status", None)
            return new
        if call.subresource == "status":
            merged = copy.deepcopy(old)
            if "status" in new:
                merged["status"] = new["status"]
            else:
                merged.pop("status", None)
            return merged
        if res.status_subresource:
            if "status" in old:
                new["status"] = copy.deepcopy(old["status"])
            else:
                new.pop("status", None)
        meta, old_meta = new["metadata"], old["metadata"]
        for key in ("name", "namespace", "uid", "creationTimestamp", "generation",
                    "deletionTimestamp", "deletionGracePeriodSeconds"):
            if key in old_meta:
                meta[key] = old_meta[key]
            else:
                meta.pop(key, None)
        if mt.deleting(old):
            added = [f for f in mt.finalizers(new) if f not in mt.finalizers(old)]
            if added:
                # ValidateObjectMetaUpdate reports it twice (metadata and finalizers checks)
                why = st.forbidden_field(
                    "metadata.finalizers", "no new finalizers can be added if the object is "
                    "being deleted, found new finalizers []string{"
                    + ", ".join(json.dumps(f) for f in added) + "}")
                raise st.invalid_object(res.kind, res.group, old_meta["name"], [why, why])
        return new

    def _precondition(self, call: Call, old: Obj, body_rv: str | None) -> None:
        if not body_rv:
            return
        if mt.parse_rv(body_rv) != int(old["metadata"]["resourceVersion"]):
            raise st.conflict(call.res.gr, call.res.group, call.res.plural, call.name,
                              st.OBJECT_MODIFIED)

    def _commit(self, call: Call, old: Obj | None, new: Obj,
                entries: builtins.list[ssa.Entry] | None = None,
                sent: Obj | None = None) -> Obj:
        """Validate `new`, record ownership (Update unless `entries` given; of `new` with
        the fields in `sent` as the client sent them) and store."""
        reset = new["metadata"].get("managedFields") == []
        new = self._validate(call, self._strategy(call, old, new))
        # ObjectMeta goes through its typed form (built-ins; for custom resources the
        # CRD handler's metadata coercion), whose empty maps and lists are omitted
        for key in ("labels", "annotations", "finalizers", "ownerReferences"):
            if new["metadata"].get(key) in ({}, []):
                del new["metadata"][key]
        new["apiVersion"] = call.res.api_version(call.res.storage_version)
        new["kind"] = call.res.kind
        meta = new["metadata"]
        if entries is None:
            schema = call.res.schema(call.version)
            # ownership is computed on the view the writer used (Events: either API)
            base = self.output(call, old) if old is not None else _zero_value(call)
            old_flat = fp.flatten(base, schema, nodes=True)
            entries = ssa.record_update(
                [] if reset else ssa.parse(old), old_flat,
                fp.flatten(_as_sent(new, sent), schema, nodes=True),
                call.manager, ssa.Scope(call.subresource, call.res.status_subresource),
                call.api_version, mt.now())
        meta["managedFields"] = ssa.dump(entries)
        if not meta["managedFields"]:
            del meta["managedFields"]
        if call.res.storage_id == events.STORAGE_ID and call.res.group == events.GROUP:
            new = events.to_core(new)
        if old is None:
            return self._insert(call, new)
        if call.res.track_generation and mt.spec_changed(old, new):
            meta["generation"] = int(old["metadata"].get("generation", 1)) + 1
        meta["resourceVersion"] = old["metadata"]["resourceVersion"]
        if new == old or call.dry_run:
            return new
        if mt.deleting(new) and not mt.finalizers(new):
            # the real registry deletes instead of writing the emptied object, and
            # answers with that final object
            gone = self.store.delete(call.res.storage_id, call.namespace, call.name)
            if gone is not None:
                new["metadata"]["resourceVersion"] = gone["metadata"]["resourceVersion"]
            return new
        return self.store.put(call.res.storage_id, new)

    def _insert(self, call: Call, new: Obj) -> Obj:
        meta = new["metadata"]
        if call.res.namespaced:
            meta["namespace"] = call.namespace
            if self.store.get("/namespaces", "", call.namespace) is None:
                raise st.not_found("namespaces", "", "namespaces", call.namespace)
        else:
            meta.pop("namespace", None)
        if self.store.get(call.res.storage_id, call.namespace, meta["name"]) is not None:
            raise st.already_exists(call.res.gr, call.res.group, call.res.plural, meta["name"])
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = mt.now()
        for key in ("deletionTimestamp", "deletionGracePeriodSeconds", "resourceVersion"):
            meta.pop(key, None)
        if call.res.track_generation:
            meta["generation"] = 1
        if call.dry_run:
            return new
        builtin.on_create(self.registry, call.res, new)
        return self.store.put(call.res.storage_id, new)

    # --- create / update ---------------------------------------------------------------

    def create(self, call: Call, body: Any) -> Reply:
        obj = self._check_body(call, body)
        meta = obj["metadata"]
        if meta.get("resourceVersion"):
            raise st.internal("resourceVersion should not be set on objects to be created")
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = mt.generate_name(meta["generateName"])
        call.name = meta.get("name", "")
        call.meta_errors = mt.name_errors(call.res.plural, call.name)
        sent = builtin.normalize(call.res, obj)
        with self.store.lock:
            return Reply(201, self.output(call, self._commit(call, None, obj, sent=sent)))

    def update(self, call: Call, body: Any) -> Reply:
        obj = self._check_body(call, body)
        name = obj["metadata"].get("name", "")
        if name != call.name:
            raise st.bad_request(f"the name of the object ({name}) does not match the name "
                                 f"on the URL ({call.name})")
        sent = builtin.normalize(call.res, obj)
        with self.store.lock:
            old = self._existing(call)
            body_rv = obj["metadata"].get("resourceVersion")
            if not body_rv and call.res.custom:
                # named by resource, not kind: the registry's update check says so
                raise st.ApiError(422, "Invalid", f'{call.res.gr} "{call.name}" is invalid: '
                                  "metadata.resourceVersion: Invalid value: 0: must be "
                                  "specified for an update", {
                                      "name": call.name, "group": call.res.group,
                                      "kind": call.res.plural, "causes": [st.invalid(
                                          "metadata.resourceVersion", 0,
                                          "must be specified for an update").cause()]})
            self._precondition(call, old, body_rv)
            return Reply(200, self.output(call, self._commit(call, old, obj, sent=sent)))

    # --- patch ---------------------------------------------------------------------------

    def patch(self, call: Call, raw: bytes, content_type: str) -> Reply:
        kind = content_type.split(";")[0].strip().lower()
        if kind == APPLY:
            return self._apply(call, raw)
        accepted = _ACCEPTED if call.res.custom else _ACCEPTED_BUILTIN
        if kind not in accepted:
            raise st.unsupported_media_type(kind, accepted)
        if call.query.get("force"):
            raise st.ApiError(422, "Invalid", 'PatchOptions.meta.k8s.io "" is invalid: force: '
                              "Forbidden: may not be specified for non-apply patch", {
                                  "group": "meta.k8s.io", "kind": "PatchOptions", "causes": [
                                      st.forbidden_field("force", "may not be specified for "
                                                         "non-apply patch").cause()]})
        doc = decoding.patch_document(raw)
        with self.store.lock:
            old = self._existing(call)
            current = self.output(call, old)
            try:
                patched = (patches.json_patch(current, doc) if kind == JSON_PATCH
                           else patches.merge_patch(current, doc))
            except st.ApiError as err:
                if err.code != 422:
                    raise
                # the real server hides the JSON patch library's reason
                raise st.ApiError(422, "Invalid", "the server rejected our request due to "
                                  "an error in our request", {}) from None
            obj = self._check_body(call, patched)
            if obj["metadata"].get("name") != call.name:
                raise st.bad_request("the name of the object cannot be changed by a patch")
            body_rv = obj["metadata"].get("resourceVersion")
            if body_rv != old["metadata"]["resourceVersion"]:
                self._precondition(call, old, body_rv)
            sent = builtin.normalize(call.res, obj)
            return Reply(200, self.output(call, self._commit(call, old, obj, sent=sent)))

    def _apply(self, call: Call, raw: bytes) -> Reply:
        manager = call.query.get("fieldManager", "")
        if not manager:
            raise st.ApiError(422, "Invalid", 'PatchOptions.meta.k8s.io "" is invalid: '
                              "fieldManager: Required value: is required for apply patch",
                              {"group": "meta.k8s.io", "kind": "PatchOptions", "causes": [{
                                  "reason": "FieldValueRequired",
                                  "message": "Required value: is required for apply patch",
                                  "field": "fieldManager"}]})
        try:
            doc = decoding.load_yaml(raw or b"")
        except yaml.YAMLError as exc:
            raise st.bad_request(f"error decoding YAML: {exc}") from None
        if isinstance(doc, dict) and not doc.get("kind") and not doc.get("apiVersion"):
            raise st.bad_request("invalid object type: /, Kind=")
        if isinstance(doc, dict) and not call.res.custom and not doc.get("kind"):
            raise st.bad_request(f"Object 'Kind' is missing in '{json.dumps(doc)}'")
        config = self._check_body(call, doc)
        if config["metadata"].get("name") != call.name:
            raise st.bad_request("the name of the object must match the name in the URL")
        force = call.query.get("force", "").lower() in ("true", "1")
        schema = call.res.schema(call.version)
        pruned = sch.check(config, schema)
        if pruned.unknown and call.query.get("fieldValidation") == "Strict":
            raise st.bad_request("strict decoding error: " + ", ".join(
                f'unknown field "{p}"' for p in pruned.unknown))
        config = pruned.value
        with self.store.lock:
            old = self.store.get(call.res.storage_id, call.namespace, call.name)
            if old is None and call.subresource:
                raise st.not_found(call.res.gr, call.res.group, call.res.plural, call.name)
            if old is not None:
                self._precondition(call, old, config["metadata"].get("resourceVersion"))
            live = self.output(call, old) if old is not None else {
                "apiVersion": call.api_version, "kind": call.res.kind,
                "metadata": {"name": call.name}}
            config["metadata"].pop("resourceVersion", None)
            done = ssa.apply(live, config, schema, ssa.parse(old), manager,
                             ssa.Scope(call.subresource, call.res.status_subresource),
                             call.api_version, mt.now(), force)
            merged = done.obj
            merged["metadata"].pop("managedFields", None)
            if old is None:
                errors = mt.name_errors(call.res.plural, call.name)
                if errors:
                    raise st.invalid_object(call.res.kind, call.res.group, call.name, errors)
                builtin.normalize(call.res, merged)
                return Reply(201, self.output(call, self._commit(call, None, merged,
                                                                 done.entries)))
            builtin.normalize(call.res, merged)
            return Reply(200, self.output(call, self._commit(call, old, merged, done.entries)))

    # --- delete ----------------------------------------------------------------------------

    def delete(self, call: Call, options: Obj | None) -> Reply:
        options = options or {}
        policy = options.get("propagationPolicy") or call.query.get("propagationPolicy", "")
        pre = options.get("preconditions") or {}
        with self.store.lock:
            old = self._existing(call)
            meta = old["metadata"]
            # the storage layer's wording (apiserver storage/errors: NewConflict on Kind)
            qualified = f"{call.res.kind}.{call.res.group}" if call.res.group else call.res.kind
            if pre.get("uid") and pre["uid"] != meta.get("uid"):
                raise st.conflict(qualified, call.res.group, call.res.kind, call.name,
                                  f"the UID in the precondition ({pre['uid']}) does not match "
                                  f"the UID in record ({meta.get('uid')}). The object might "
                                  "have been deleted and then recreated")
            if pre.get("resourceVersion") and pre["resourceVersion"] != meta["resourceVersion"]:
                raise st.conflict(qualified, call.res.group, call.res.kind, call.name,
                                  "the ResourceVersion in the precondition "
                                  f"({pre['resourceVersion']}) does not match the "
                                  f"ResourceVersion in record ({meta['resourceVersion']}). "
                                  "The object might have been modified")
            if call.dry_run:
                if mt.finalizers(old) or policy == "Foreground":
                    return Reply(200, self.output(call, old))
                return Reply(200, st.success_status(call.name, call.res.group,
                                                    call.res.plural, meta.get("uid", "")))
            if policy == "Orphan":
                builtin.orphan_dependents(self.store, meta.get("uid", ""))
            if call.res.plural == "namespaces" and not call.res.group:
                return Reply(200, self.output(call, builtin.terminate_namespace(self.store, old)))
            if mt.finalizers(old) or policy == "Foreground":
                if mt.deleting(old):
                    return Reply(200, self.output(call, old))
                new = copy.deepcopy(old)
                new["metadata"]["deletionTimestamp"] = mt.now()
                new["metadata"]["deletionGracePeriodSeconds"] = 0
                if policy == "Foreground" and FOREGROUND not in mt.finalizers(old):
                    new["metadata"]["finalizers"] = [*mt.finalizers(old), FOREGROUND]
                if "generation" in meta:
                    new["metadata"]["generation"] = int(meta["generation"]) + 1
                return Reply(200, self.output(call, self.store.put(call.res.storage_id, new)))
            self.store.delete(call.res.storage_id, call.namespace, call.name)
            return Reply(200, st.success_status(call.name, call.res.group, call.res.plural,
                                                meta.get("uid", "")))
