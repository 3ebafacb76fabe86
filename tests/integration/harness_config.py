"""The proxy's configuration in tests: base_config() builds the standard test config as a
dict (generous defaults, *.test resolved to 127.0.0.1, loopback destinations allowed),
dump_config() renders a dict as the YAML file the proxy reads."""
import yaml


def base_config(hosts=None, tls_port=None, allow_loopback=True, **defaults_over):
    """The standard test config: generous defaults, *.test -> 127.0.0.1."""
    defaults = {
        "concurrency": 2,
        "rate": 100,
        "burst": 100,
        "queue": {"max_waiting": 1000, "max_wait": "60s"},
        "timeouts": {"connect": "5s", "response_headers": "30s", "idle": "30s"},
    }
    for k, v in defaults_over.items():
        if isinstance(v, dict) and isinstance(defaults.get(k), dict):
            defaults[k] = dict(defaults[k], **v)
        else:
            defaults[k] = v
    cfg = {
        "listen": "127.0.0.1:0",
        "admin_listen": "127.0.0.1:0",
        "workers": 2,
        "drain_timeout": "2s",
        "defaults": defaults,
        "hosts": dict(hosts or {}),
        "resolve": {"*.test": "127.0.0.1"},
        "security": {"connect_ports": [443] + ([tls_port] if tls_port else [])},
    }
    if allow_loopback:
        cfg["security"]["allow_destinations"] = ["127.0.0.0/8"]
    return cfg


def dump_config(cfg):
    return yaml.safe_dump(cfg, sort_keys=False, default_flow_style=False)
