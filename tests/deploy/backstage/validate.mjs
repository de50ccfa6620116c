// Checks a catalog-info.yaml the way a Backstage catalog ingests it, with the validators of
// @backstage/catalog-model itself:
//   1. every YAML document is parsed (the `yaml` package, as the catalog backend does);
//   2. `$text`, `$json` and `$yaml` placeholders are replaced by the file they name, relative
//      to the catalog file (the catalog's placeholder processor; a missing file is an error);
//   3. the entity policies a catalog applies by default: schema, default namespace, no foreign
//      root fields, field formats;
//   4. exactly one of the built-in kind validators must accept the entity.
// Prints one JSON report on stdout: {"entities": [...], "errors": [...]}; exits 1 on any error.
//
// Usage: node validate.mjs path/to/catalog-info.yaml
import { readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";

import {
  DefaultNamespaceEntityPolicy,
  EntityPolicies,
  FieldFormatEntityPolicy,
  NoForeignRootFieldsEntityPolicy,
  SchemaValidEntityPolicy,
  apiEntityV1alpha1Validator,
  componentEntityV1alpha1Validator,
  domainEntityV1alpha1Validator,
  groupEntityV1alpha1Validator,
  locationEntityV1alpha1Validator,
  makeValidator,
  resourceEntityV1alpha1Validator,
  systemEntityV1alpha1Validator,
  userEntityV1alpha1Validator,
} from "@backstage/catalog-model";
import { parse, parseAllDocuments } from "yaml";

const KINDS = {
  API: apiEntityV1alpha1Validator,
  Component: componentEntityV1alpha1Validator,
  Domain: domainEntityV1alpha1Validator,
  Group: groupEntityV1alpha1Validator,
  Location: locationEntityV1alpha1Validator,
  Resource: resourceEntityV1alpha1Validator,
  System: systemEntityV1alpha1Validator,
  User: userEntityV1alpha1Validator,
};

const policy = EntityPolicies.allOf([
  new SchemaValidEntityPolicy(),
  new DefaultNamespaceEntityPolicy(),
  new NoForeignRootFieldsEntityPolicy(),
  new FieldFormatEntityPolicy(makeValidator()),
]);

function resolvePlaceholders(value, base, where) {
  if (Array.isArray(value)) {
    return value.map((item, i) => resolvePlaceholders(item, base, `${where}[${i}]`));
  }
  if (value === null || typeof value !== "object") {
    return value;
  }
  const keys = Object.keys(value);
  if (keys.length === 1 && ["$text", "$json", "$yaml"].includes(keys[0])) {
    const target = resolve(base, value[keys[0]]);
    const text = readFileSync(target, "utf8"); // throws: a placeholder naming no file
    if (keys[0] === "$json") return JSON.parse(text);
    if (keys[0] === "$yaml") return parse(text);
    return text;
  }
  return Object.fromEntries(
    keys.map((key) => [key, resolvePlaceholders(value[key], base, `${where}.${key}`)]),
  );
}

async function check(path) {
  const base = dirname(resolve(path));
  const entities = [];
  const errors = [];
  const documents = parseAllDocuments(readFileSync(path, "utf8"));
  for (const [index, document] of documents.entries()) {
    const where = `document ${index + 1}`;
    if (document.errors.length > 0) {
      errors.push(`${where}: ${document.errors.map((e) => e.message).join("; ")}`);
      continue;
    }
    try {
      const raw = document.toJS();
      if (raw === null || typeof raw !== "object" || Array.isArray(raw)) {
        throw new Error("not an object");
      }
      const entity = await policy.enforce(resolvePlaceholders(raw, base, where));
      const accepted = [];
      for (const [kind, validator] of Object.entries(KINDS)) {
        if (await validator.check(entity)) accepted.push(kind);
      }
      if (accepted.length !== 1) {
        throw new Error(`accepted by ${accepted.length} kind validators (${accepted}), not 1`);
      }
      entities.push({
        kind: entity.kind,
        namespace: entity.metadata.namespace,
        name: entity.metadata.name,
        spec: entity.spec,
      });
    } catch (error) {
      errors.push(`${where}: ${error.message}`);
    }
  }
  return { entities, errors };
}

const report = await check(process.argv[2] ?? "catalog-info.yaml");
process.stdout.write(`${JSON.stringify(report)}\n`);
process.exitCode = report.errors.length === 0 ? 0 : 1;
