// SPDX-License-Identifier: Apache-2.0
//! Pure: renders a `leasehook query --format` template — Jinja, through minijinja —
//! over instance data with cloud-init's conveniences ([`query::template_data`]: the
//! `v1` keys also at the top level, `_` aliases for keys holding `-`, `.`, `/`).
//!
//! Undefined values follow minijinja's "semi-strict" rule: a name or key the data
//! lacks may be tested (`{% if v1.region %}`, `{{ x is defined }}`,
//! `{{ x | default("-") }}`) but printing or iterating it is an error that names
//! what is missing and the nearest keys, where cloud-init prints
//! `CI_MISSING_JINJA_VAR/<name>` and exits 0: a script should not carry on with a
//! placeholder for its hostname.

use anyhow::anyhow;
use leasehook_core::query;
use minijinja::{Environment, ErrorKind, Template, UndefinedBehavior};
use serde_json::Value;

/// The template's name in error messages: `(in --format:LINE)`.
const NAME: &str = "--format";

/// Renders `template` over the instance-data document `doc`.
pub(crate) fn render(template: &str, doc: &Value) -> anyhow::Result<String> {
    let data = query::template_data(doc);
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::SemiStrict);
    let tmpl = env
        .template_from_named_str(NAME, template)
        .map_err(|e| anyhow!("the template: {e}"))?;
    tmpl.render(minijinja::Value::from(minijinja::value::Serde(&data)))
        .map_err(|e| {
            let mut msg = format!("the template: {e}");
            if e.kind() == ErrorKind::UndefinedError {
                msg.push_str(&missing(&env, &tmpl, &data));
            }
            anyhow!(msg)
        })
}

/// For an undefined-value error: which of the template's names the data lacks,
/// with the nearest keys.
fn missing(env: &Environment<'_>, tmpl: &Template<'_, '_>, data: &Value) -> String {
    let globals: Vec<&str> = env.globals().map(|(k, _)| k).collect();
    let mut names: Vec<String> = tmpl
        .undeclared_variables(true)
        .into_iter()
        .filter(|n| !globals.contains(&n.split('.').next().unwrap_or_default()))
        .collect();
    names.sort();
    let reasons: Vec<String> = names
        .iter()
        .filter_map(|n| {
            let path = query::parse(n).ok()?;
            query::lookup(data, &path).err().map(|e| e.to_string())
        })
        .collect();
    if reasons.is_empty() {
        String::new()
    } else {
        format!(": {}", reasons.join("; "))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]

    use super::*;
    use serde_json::json;

    fn lxd() -> Value {
        json!({
            "v1": {"platform": "lxd", "subplatform": "LXD socket API v. 1.0 (/dev/lxd/sock)",
                   "instance-id": "i-87018aed", "instance_id": "i-87018aed",
                   "local-hostname": "myhost", "local_hostname": "myhost", "region": null},
            "ds": {"1.0": {"config": {"user.tag": "blue", "user.user-data": "#cloud-config\n"}},
                   "meta-data": "instance-id: i-87018aed\n"},
        })
    }

    #[test]
    fn templates_use_v1_keys_aliases_loops_and_conditionals() {
        let doc = lxd();
        let cases = [
            (
                "{{platform}} {{subplatform}}",
                "lxd LXD socket API v. 1.0 (/dev/lxd/sock)",
            ),
            (
                "{{ v1.instance_id }}/{{ instance_id }}",
                "i-87018aed/i-87018aed",
            ),
            ("{{ local_hostname }}", "myhost"),
            ("{{ ds['1.0'].config['user.tag'] }}", "blue"),
            ("{{ ds['1.0'].config.user_tag }}", "blue"),
            ("{{ ds.meta_data | trim }}", "instance-id: i-87018aed"),
            (
                "{% for k in ds['1.0'].config | sort %}{{ k }};{% endfor %}",
                // The aliases are keys too, as in cloud-init.
                "user.tag;user.user-data;user_tag;user_user_data;",
            ),
            (
                "{% for k, v in ds['1.0'].config | items %}{% if k == 'user.tag' %}{{ v }}{% endif %}{% endfor %}",
                "blue",
            ),
            (
                "{% if region %}{{ region }}{% else %}no region{% endif %}",
                "no region",
            ),
            (
                "{% if v1.nope is defined %}yes{% else %}no{% endif %}",
                "no",
            ),
            ("{{ v1.nope | default('-') }}", "-"),
            ("{{ platform | upper }}{# comment #}", "LXD"),
        ];
        for (t, want) in cases {
            assert_eq!(
                render(t, &doc).unwrap_or_else(|e| panic!("{t}: {e}")),
                want,
                "{t}"
            );
        }
    }

    #[test]
    fn bad_templates_say_what_and_where() {
        let doc = lxd();
        let cases = [
            (
                "{{ platform ",
                "the template: syntax error: unexpected end of input",
            ),
            ("{% if platform %}x", "syntax error"),
            ("a\n{% for x in %}", "(in --format:2)"),
            ("{{ platform | nosuchfilter }}", "unknown filter"),
            (
                "{{ platfrom }}",
                "undefined value (in --format:1): instance-data key platfrom: instance data has no key \"platfrom\"",
            ),
            ("{{ v1.instance_idd }}", "nearest: instance-id, instance_id"),
            (
                "{% for x in v1.nope %}{% endfor %}",
                "v1 has no key \"nope\"",
            ),
        ];
        for (t, want) in cases {
            let e = render(t, &doc).unwrap_err().to_string();
            assert!(e.contains(want), "{t}: {e}");
        }
        let e = render("{{ platfrom }}", &doc).unwrap_err().to_string();
        assert!(e.contains("nearest: platform"), "{e}");
    }
}
