// js-policy: an Airlock policy plugin in JavaScript (world airlock:adapter/policy-plugin@0.2.0).
//
// Rules (adapter_config.policy):
//   deny            = ["GLOB", ...]   server tool names (`*` any run, `?` one character) that never run
//   deny_arguments  = ["REGEX", ...]  a call whose arguments (JSON text) match is denied
//   ask             = ["GLOB", ...]   tools that need a person's approval first
//   redact_keys     = ["KEY", ...]    argument keys whose values are replaced by "[withheld]" (a rewrite)
//   max_result_chars = N              a result with more text than N is withheld
//
// Errors are returned by throwing a string: any other exception would trap the instance.
import { log } from 'airlock:adapter/log@0.2.0';

const KNOWN = ['deny', 'deny_arguments', 'ask', 'redact_keys', 'max_result_chars'];

let rules = { deny: [], denyArguments: [], ask: [], redactKeys: [], maxResultChars: null };

function globToRegExp(glob) {
  let source = '^';
  for (const ch of glob) {
    if (ch === '*') source += '.*';
    else if (ch === '?') source += '.';
    else source += ch.replace(/[.+^${}()|[\]\\\/-]/g, '\\$&');
  }
  return new RegExp(source + '$', 's');
}

function stringList(config, key) {
  const value = config[key];
  if (value === undefined) return [];
  if (!Array.isArray(value) || !value.every((s) => typeof s === 'string')) {
    throw `${key} must be a list of strings`;
  }
  return value;
}

function compile(config) {
  if (config === null || typeof config !== 'object' || Array.isArray(config)) {
    throw 'the configuration must be a table';
  }
  for (const key of Object.keys(config)) {
    if (!KNOWN.includes(key)) throw `unknown setting "${key}" (known: ${KNOWN.join(', ')})`;
  }
  const max = config.max_result_chars;
  if (max !== undefined && !(Number.isInteger(max) && max >= 0)) {
    throw 'max_result_chars must be a whole number';
  }
  return {
    deny: stringList(config, 'deny').map((glob) => ({ glob, re: globToRegExp(glob) })),
    denyArguments: stringList(config, 'deny_arguments').map((pattern) => {
      try {
        return { pattern, re: new RegExp(pattern) };
      } catch (e) {
        throw `deny_arguments ${JSON.stringify(pattern)} is not a valid regex: ${e.message}`;
      }
    }),
    ask: stringList(config, 'ask').map((glob) => ({ glob, re: globToRegExp(glob) })),
    redactKeys: stringList(config, 'redact_keys'),
    maxResultChars: max ?? null,
  };
}

const verdict = (decision, rule) => ({ decision, rule });

/** Replaces the values of `keys` anywhere in `value`; returns whether any was found. */
function withhold(value, keys) {
  let found = false;
  if (Array.isArray(value)) {
    for (const item of value) found = withhold(item, keys) || found;
  } else if (value !== null && typeof value === 'object') {
    for (const [key, inner] of Object.entries(value)) {
      if (keys.includes(key)) {
        value[key] = '[withheld]';
        found = true;
      } else {
        found = withhold(inner, keys) || found;
      }
    }
  }
  return found;
}

export const plugin = {
  describe() {
    return { name: 'js-policy', version: '0.1.0', stages: ['policy'] };
  },

  init(stage, config) {
    if (stage !== 'policy') throw `js-policy serves the policy stage, not ${stage}`;
    let parsed;
    try {
      parsed = JSON.parse(config);
    } catch (e) {
      throw `the configuration is not JSON: ${e.message}`;
    }
    rules = compile(parsed);
    log('debug', `js-policy: ${rules.deny.length} deny, ${rules.denyArguments.length} argument, ${rules.ask.length} ask rules`);
  },
};

export const policy = {
  checkCall(call) {
    const denied = rules.deny.find(({ re }) => re.test(call.rawTool));
    if (denied) {
      return verdict({ tag: 'deny', val: `tool ${call.rawTool} is denied (${denied.glob})` }, `deny:${denied.glob}`);
    }
    const pattern = rules.denyArguments.find(({ re }) => re.test(call.arguments));
    if (pattern) {
      return verdict({ tag: 'deny', val: `the arguments match a denied pattern` }, `deny_arguments:${pattern.pattern}`);
    }
    const ask = rules.ask.find(({ re }) => re.test(call.rawTool));
    if (ask) {
      return verdict({ tag: 'ask', val: `Allow ${call.rawTool} on ${call.service}?` }, `ask:${ask.glob}`);
    }
    if (rules.redactKeys.length > 0) {
      let args;
      try {
        args = JSON.parse(call.arguments);
      } catch (e) {
        throw `the host sent arguments that are not JSON: ${e.message}`;
      }
      if (withhold(args, rules.redactKeys)) {
        return verdict({ tag: 'rewrite', val: JSON.stringify(args) }, 'redact_keys');
      }
    }
    return verdict({ tag: 'allow' }, 'default');
  },

  checkResult(call, result) {
    if (rules.maxResultChars !== null) {
      let chars = 0;
      for (const block of result.content) {
        if (block.tag === 'text') chars += block.val.text.length;
      }
      if (chars > rules.maxResultChars) {
        return verdict(
          { tag: 'withhold', val: `the result of ${call.rawTool} holds ${chars} characters, more than ${rules.maxResultChars}` },
          'max_result_chars',
        );
      }
    }
    return verdict({ tag: 'allow' }, 'default');
  },
};
