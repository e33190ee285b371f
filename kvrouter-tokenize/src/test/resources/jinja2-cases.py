import json, datetime
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.ext import loopcontrols
from jinja2.exceptions import TemplateError
def raise_exception(m): raise TemplateError(m)
def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)
def strftime_now(f): return datetime.datetime(2026, 7, 4, 9, 5, 3).strftime(f)
env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception
env.globals["strftime_now"] = strftime_now
cases = json.load(open("cases.json"))
out = []
for c in cases:
    try:
        r = env.from_string(c["t"]).render(**c.get("ctx", {}))
        out.append({"t": c["t"], "ctx": c.get("ctx", {}), "out": r})
    except Exception as e:
        out.append({"t": c["t"], "ctx": c.get("ctx", {}), "err": type(e).__name__ + ": " + str(e)})
print(json.dumps(out, ensure_ascii=False, indent=1))
