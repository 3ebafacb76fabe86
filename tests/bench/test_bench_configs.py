#!/usr/bin/python3
"""Every benchmark of politeproxy's cost runs with the same settings: limits wide open, no
adaptive limit, one worker. A bench that drifts from them measures something else (an
h2_bench config without `adaptive: {enabled: false}` once reported 4.1x HAProxy's CPU per
request: the controller had cut the wide-open limit). ctest runs this (label unit).

Checked: the configs cost_config() renders (pass-through, kernel_ab, instructions_ab,
parent_bench, h2_bench, dns_bench, host_scale_bench) and the other cost templates (intercept, fleet, memory)
carry the cost template's `workers` and `defaults`, extended only by keys named here; the
non-cost templates (politeness, parked) say `adaptive` outright rather than inherit it.
"""
import os
import sys
import unittest

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_plan as plan  # noqa: E402
import dns_bench  # noqa: E402
import h2_bench  # noqa: E402
import host_scale_bench  # noqa: E402

# Keys a cost config may add to the cost template's defaults, and why.
EXTRA_DEFAULTS = {
    "upstream_protocol",  # h2_bench's h2c back end
    "timeouts",  # the memory scenario's idle timeout
}


def cost_template():
    return yaml.safe_load(plan.render(plan.COST_TEMPLATE))


class CostConfigs(unittest.TestCase):
    def assert_cost_settings(self, name, text):
        want, got = cost_template(), yaml.safe_load(text)
        self.assertEqual(got.get("workers"), want["workers"], name)
        defaults = dict(got.get("defaults", {}))
        extra = set(defaults) - set(want["defaults"])
        self.assertLessEqual(extra, EXTRA_DEFAULTS, "%s adds defaults %s" % (name, sorted(extra)))
        for key in extra:
            defaults.pop(key)
        self.assertEqual(defaults, want["defaults"], name)

    def test_the_template_is_wide_open_and_not_adaptive(self):
        d = cost_template()["defaults"]
        self.assertIs(d["adaptive"]["enabled"], False)
        self.assertGreaterEqual(d["concurrency"], 100000)
        self.assertGreaterEqual(d["rate"], 1e9)
        self.assertEqual(cost_template()["workers"], 1)

    def test_cost_config_is_the_template_with_overrides(self):
        self.assertEqual(yaml.safe_load(plan.cost_config()), cost_template())
        merged = yaml.safe_load(plan.cost_config(resolve=None, defaults={"upstream_protocol": "h2c"}))
        self.assertNotIn("resolve", merged)
        self.assertEqual(merged["defaults"]["upstream_protocol"], "h2c")
        self.assertIs(merged["defaults"]["adaptive"]["enabled"], False)

    def test_h2_bench(self):
        for h2 in (False, True):
            self.assert_cost_settings("h2_bench h2=%s" % h2, h2_bench.politeproxy_config(1, 2, h2))

    def test_dns_bench(self):
        self.assert_cost_settings("dns_bench", dns_bench.CONFIG)

    def test_host_scale_bench(self):
        self.assert_cost_settings("host_scale_bench", host_scale_bench.config("5s"))

    def test_other_cost_templates(self):
        self.assert_cost_settings("intercept", plan.render("politeproxy-intercept.yaml.in", origin_port=1,
                                                           ca_cert="c", ca_key="k", origin_ca="o"))
        self.assert_cost_settings("fleet", plan.render("politeproxy-fleet.yaml.in", fleet=""))
        self.assert_cost_settings("memory", plan.render("politeproxy-memory.yaml.in", idle="5s",
                                                        host_idle_ttl="10m"))

    def test_non_cost_templates_say_adaptive_outright(self):
        for name, values in (("politeproxy-politeness.yaml.in", {"adaptive": "false"}),
                             ("politeproxy-parked.yaml.in", {})):
            d = yaml.safe_load(plan.render(name, **values))["defaults"]
            self.assertIn("enabled", d.get("adaptive", {}), name)

    def test_every_template_is_checked_here(self):
        checked = {plan.COST_TEMPLATE, "politeproxy-intercept.yaml.in", "politeproxy-fleet.yaml.in",
                   "politeproxy-memory.yaml.in", "politeproxy-politeness.yaml.in", "politeproxy-parked.yaml.in"}
        templates = {n for n in os.listdir(plan.CONF) if n.startswith("politeproxy-")}
        self.assertEqual(templates - checked, set(), "a new politeproxy template: check its settings here")


if __name__ == "__main__":
    unittest.main()
