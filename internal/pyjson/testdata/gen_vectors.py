#!/usr/bin/env python3
"""Generate testdata/vectors.json for package pyjson with CPython's json module.

Run from anywhere with CPython 3.11: python3 testdata/gen_vectors.py
The Go tests only read the generated file; they never need Python.

Every vector gives raw input bytes and json.dumps keyword arguments. The
expected output is exactly what CPython writes for
    obj = json.loads(raw)
    if isinstance(obj, dict): obj = {k: v for k, v in obj.items() if k not in drop}
    json.dumps(obj, sort_keys=..., ensure_ascii=..., separators=...)
encoded as UTF-8, except where a vector carries a "deviation" note (the
package documents those differences).
"""

import base64
import decimal
import itertools
import json
import math
import os
import random
import re
import struct
import sys

assert sys.version_info[:2] == (3, 11), "generate with CPython 3.11"

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "vectors.json")
rng = random.Random(20240611)
vectors = []

ALL_OPTS = [
    dict(sort_keys=s, ensure_ascii=a, compact=c)
    for s, a, c in itertools.product([False, True], repeat=3)
]
SDK_DROP = ["_agents_tool_description", "_agents_tool_title"]

LONE = re.compile("[\ud800-\udfff]")


def python_dumps(raw, opts, drop):
    obj = json.loads(raw)
    if isinstance(obj, dict):
        obj = {k: v for k, v in obj.items() if k not in drop}
    seps = (",", ":") if opts["compact"] else None
    return json.dumps(obj, sort_keys=opts["sort_keys"], ensure_ascii=opts["ensure_ascii"], separators=seps)


def put_input(v, raw):
    try:
        v["input"] = raw.decode("utf-8")
    except UnicodeDecodeError:
        v["input_b64"] = base64.b64encode(raw).decode("ascii")


def add(name, raw, opts_list=ALL_OPTS, drop=(), deviation=None):
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogatepass")
    for opts in opts_list:
        v = {"name": name}
        put_input(v, raw)
        v.update(opts)
        v["drop"] = list(drop)
        try:
            out = python_dumps(raw, opts, drop)
        except (ValueError, RecursionError) as e:
            v["error"] = type(e).__name__
        else:
            if LONE.search(out):
                # ensure_ascii=False left a lone surrogate in the str, which
                # has no UTF-8 form: pyjson writes its \uXXXX escape instead.
                out = LONE.sub(lambda m: "\\u%04x" % ord(m.group()), out)
                v["deviation"] = "lone surrogate written as its escape"
            v["output"] = out
        if deviation:
            # CPython accepts this input; pyjson rejects it on purpose.
            v["deviation"] = deviation
            v["python_output"] = v.pop("output", None)
            v["error"] = "deviation"
        vectors.append(v)


def float_literal(text):
    """Make text a JSON float literal (with a fraction or an exponent)."""
    if not re.search(r"[.eE]", text):
        text += ".0"
    assert re.fullmatch(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?", text), text
    return text


def random_double():
    while True:
        f = struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0]
        if math.isfinite(f):
            return f


# --- Numbers -----------------------------------------------------------------

FLOATS = [
    "5e-324", "-5e-324", "2.2250738585072014e-308", "2.225073858507201e-308",
    "1.7976931348623157e308", "-1.7976931348623157e+308", "1.7976931348623158e308",
    "1.7976931348623159e308", "0.30000000000000004", "0.1", "0.2", "0.3", "1e22",
    "1e21", "1e23", "123456789012345678.0", "123456789012345678e0", "1e16", "1e15",
    "9999999999999998.0", "9999999999999999.0", "1e-4", "1e-5", "0.0001", "0.00001",
    "0.00012345", "0.000012345", "1.5e-7", "100.0", "1.0", "-0.0", "0.0", "0e0", "-0e0",
    "0E+5", "1E5", "1e+5", "1e-0", "1.5", "-2.5", "3.14159", "2.718281828459045",
    "1e400", "-1e400", "1e-400", "-1e-400", "1e99999999999999999999", "1E-99999999999",
    "4.9406564584124654e-324", "2.4703282292062327e-324", "2.4703282292062328e-324",
    "9007199254740993.0", "9007199254740992.0", "9007199254740991.0",
    "0.1000000000000000055511151231257827021181583404541015625",
    "1.00000000000000011102230246251565404236316680908203125",
    "1.00000000000000011102230246251565404236316680908203126",
    "1.00000000000000011102230246251565404236316680908203124",
    "7.2057594037927933e16", "1.2345678901234567e-300", "123.456e-2", "0.5e1",
    "12345678901234567890.0", "1e0", "10e-1", "1234567890123456.7", "12345678901234567.0",
    "0.000099999999999999999", "0.0000999999999999999", "99999999999999990000.0",
]
add("floats", "[" + ",".join(FLOATS) + "]")
add("float top level", "1.5e-7", opts_list=ALL_OPTS[:1])
for i, lit in enumerate(FLOATS):
    add("float " + lit, lit, opts_list=ALL_OPTS[:1])

decimal.getcontext().prec = 2000
for chunk in range(40):
    lits = []
    for _ in range(50):
        f = random_double()
        style = rng.randrange(7)
        if style == 0:
            lit = repr(f)
        elif style == 1:
            lit = "%.17g" % f
        elif style == 2:
            lit = "%.*e" % (rng.randrange(0, 30), f)
        elif style == 3:
            # Exact decimal midpoint to the next double: round half to even.
            nxt = math.nextafter(f, math.inf)
            if not math.isfinite(nxt):
                nxt = math.nextafter(f, -math.inf)
            mid = (decimal.Decimal(f) + decimal.Decimal(nxt)) / 2
            lit = format(mid, "f") if abs(mid.adjusted()) < 30 else format(mid, "e")
        elif style == 4:
            # Decimal magnitudes around the repr layout thresholds.
            e = rng.randrange(-8, 20)
            lit = repr(rng.random() * 10 ** e)
        elif style == 5:
            lit = repr(float(rng.randrange(1, 10 ** rng.randrange(1, 20))))
        else:
            lit = "%.*f" % (rng.randrange(0, 25), rng.uniform(-1e6, 1e6))
        lits.append(float_literal(lit.replace("e+0", "e+").replace("e-0", "e-") if rng.random() < 0.3 else lit))
    add("random floats %d" % chunk, "[" + ", ".join(lits) + "]", opts_list=[ALL_OPTS[0], ALL_OPTS[-1]])

INTS = [
    "0", "-0", "1", "-1", "7", "12345678901234567890", "-12345678901234567890",
    "9223372036854775807", "9223372036854775808", "-9223372036854775809",
    "18446744073709551616", "9007199254740993",
    "1" * 4300, "-" + "9" * 4300,
]
add("ints", "[" + ",".join(INTS) + "]")
add("int -0 top level", "-0", opts_list=ALL_OPTS[:1])
add("int too many digits", "1" * 4301, opts_list=ALL_OPTS[:1])
add("negative int too many digits", "-" + "1" * 4301, opts_list=ALL_OPTS[:1])
add("float with many digits is fine", "1" * 5000 + ".5", opts_list=ALL_OPTS[:1])
add("random ints", "[" + ",".join(str(rng.randrange(-10 ** rng.randrange(1, 60), 10 ** rng.randrange(1, 60))) for _ in range(200)) + "]", opts_list=ALL_OPTS[:1])
add("numbers in object", '{"n":1.0,"m":1e2,"k":0.1,"big":12345678901234567890,"neg":-0.0,"tiny":1.5e-7,"huge":1e16,"f":3.14159,"z":-0}')

# --- Strings -----------------------------------------------------------------

add("all ASCII", json.dumps("".join(chr(c) for c in range(128))))
add("control chars raw-escaped", '"' + "".join("\\u%04X" % c for c in range(32)) + '\\u007f"')
add("short escapes", r'"\" \\ \/ \b \f \n \r \t"')
add("slash", '"a/b</script>"')
add("bmp", json.dumps("café ☃ ü ß ∑ 中文 \u2028\u2029 \ufeff \ufffd \uffff \u00a0 \u0080 \u07ff \u0800", ensure_ascii=False))
add("bmp escaped", json.dumps("café ☃ ü ß ∑ 中文 \u2028\u2029 \ufeff \ufffd \uffff \u00a0 \u0080 \u07ff \u0800"))
add("astral", json.dumps("😀 𝄞 \U0010ffff \U00010000", ensure_ascii=False))
add("astral escaped", '"\\ud83d\\ude00 \\uD834\\uDD1E \\udbff\\udfff \\ud800\\udc00"')
add("lone surrogates", r'"\ud800 \udfff \ude00\ud83d \ud83d\u0041 \ud83d\ud83d\ude00 \ud83d"')
add("lone surrogate at end", r'"x\udbff"')
add("lone surrogate key", r'{"\ud800":1,"\ud7ff":2,"\ue000":3,"\ud83d\ude00":4,"\udc00":5}')
add("raw surrogate bytes", b'"\xed\xa0\x80 and \xed\xbf\xbf"')
add("raw surrogate pair bytes stay two code points", b'{"\xed\xa0\xbd\xed\xb8\x80":1,"\xee\x80\x80":2,"\xf0\x9f\x98\x80":3}')
add("escaped high then raw low", b'"\\ud83d\xed\xb8\x80"')
add("escapes mixed with raw", '"a\\u00e9b\\nc\\u2603 raw é ☃ 😀 \\ud83d\\ude00"')
add("uppercase hex escape", r'"\u00C9\u00e9\uABCD"')
add("nul in key", '{"a\\u0000b":1,"a":2}')
add("empty string and key", '{"":""}')

chars = [chr(c) for c in range(0x20, 0x7f)] + list("éü☃中😀𝄞\u2028\u0085\u00ad\ufeff") + ["\x00", "\x1f", "\x7f", "\n", '"', "\\"]
for i in range(30):
    s = "".join(rng.choice(chars) for _ in range(rng.randrange(0, 40)))
    add("random string %d" % i, json.dumps({s: s, "k": [s]}, ensure_ascii=rng.random() < 0.5), opts_list=[rng.choice(ALL_OPTS), rng.choice(ALL_OPTS)])

# --- Keys, order, duplicates ---------------------------------------------------

add("key order", '{"b":1,"a":2,"c":{"z":[3,2,1],"y":null,"x":true}}')
add("unicode key order", '{"é":1,"e":2,"😀":3,"\ue000":4,"Z":5,"a":6,"":7,"aa":8,"a\\u0000":9,"\\u007f":10,"\uff61":11,"\U00010000":12}')
add("utf16 vs code point order", '{"\uffff":1,"\U00010000":2,"\ue000":3}')
add("duplicate keys", '{"a":1,"b":2,"a":3}')
add("duplicate keys triple", '{"a":1,"b":2,"a":3,"c":4,"a":{"x":1,"x":2}}')
add("duplicate via escape", '{"id":1,"\\u0069d":2,"name":"n"}', drop=["id"])
add("duplicate via escape kept", '{"id":1,"\\u0069d":2,"name":"n"}')
big = ['"k%02d":%d' % (i % 13, i) for i in range(40)]
rng.shuffle(big)
add("many duplicate keys", "{" + ",".join(big) + "}")
add("many keys no duplicates", "{" + ",".join('"key%03d":%d' % (i, i) for i in rng.sample(range(500), 60)) + "}")
add("nested duplicates", '[{"a":1,"a":2},{"b":{"c":1,"c":[1,{"d":1,"d":2}]}}]')

# --- Structure ----------------------------------------------------------------

add("empty object", "{}")
add("empty array", "[]")
add("empty containers", '{"emptyobj":{},"emptyarr":[],"unicode_key_é":1}')
add("nested arrays", "[[[]],[[1,[2,[3,[]]]],{}],[{}],[[],[]]]")
add("literals", "[true,false,null,{\"t\":true,\"f\":false,\"n\":null}]")
add("whitespace", ' \t\n\r{ "a" : [ 1 , 2 ] , "b" :\n{ } }\r\n ')
add("top-level string", '"just a string"')
add("top-level null", "null")
add("bom", b'\xef\xbb\xbf{"a":1}', opts_list=ALL_OPTS[:1])
add("deep nesting", "[" * 500 + "]" * 500, opts_list=ALL_OPTS[:2])
add("deep objects", '{"a":' * 300 + "1" + "}" * 300, opts_list=ALL_OPTS[:2])

# --- Top-level key removal ------------------------------------------------------

item = '{"type":"function_call","id":"fc_1","call_id":"c2","name":"t","arguments":"{}","_agents_tool_description":"desc","_agents_tool_title":"Title","nested":{"id":"keep","_agents_tool_title":"keep"}}'
add("drop sdk keys", item, drop=SDK_DROP)
add("drop sdk keys and id", item, drop=SDK_DROP + ["id"])
add("drop everything", '{"id":1}', drop=["id"])
add("drop on array ignored", '[{"id":1}]', drop=["id"])
add("drop duplicate key", '{"id":1,"a":2,"id":3}', drop=["id"])

# --- Invalid input ----------------------------------------------------------------

INVALID = [
    "", " ", "{", "[", "[1", "[1,", '{"a"', '{"a":', '{"a" 1}', '{"a":1', '"abc', '"\\', '"\\u12"',
    '"\\u12zz"', '"\\ud83d\\u00zz"', "[1,,2]", "[,1]", "{,}", "[1,]", '{"a":1,}', "nul", "truex", "True",
    "-", "--1", "+1", "01", "-01", "1.", ".5", "1.e5", "1e", "1e+", "0x10", "1_000", "1 1", "[1 2]",
    '"\t"', '"\x00"', '"\x1f"', '"\\x"', '"\\U0041"', "{1:2}", "{'a':1}", "[]]", '{"a":1}}', "\u00a0[]",
    "\x0b[]", "/**/[]", "[]/**/", "\"a\"\"b\"", "[\"a\" \"b\"]", '{"a":1 "b":2}', "[-]", "[1e]", "-a",
]
for i, s in enumerate(INVALID):
    add("invalid %d %r" % (i, s), s, opts_list=ALL_OPTS[:1])
for i, b in enumerate([b'"\xff"', b'"\xc0\xaf"', b'"\xe2\x82"', b'"\xf5\x80\x80\x80"', b'"\xf4\x90\x80\x80"',
                       b'"\xe0\x80\xaf"', b'"\xf0\x80\x80\xaf"', b'"\xed\xa0"', b'"\x80"', b'\xff', b'{"a\xff":1}']):
    add("invalid utf-8 %d" % i, b, opts_list=ALL_OPTS[:1])

# --- Python's non-finite tokens (json.loads reads them, json.dumps writes them) ---

for s in ["NaN", "Infinity", "-Infinity", "[1,NaN]", '{"a":-Infinity}', '{"x": NaN}', '{"y": -Infinity}',
          '{"b":Infinity,"a":NaN,"c":[NaN,-Infinity,1e400,-1e400]}', ' [ NaN , Infinity ] ']:
    add("non-finite token " + s, s)
for s in ["nan", "-NaN", "+Infinity", "NaN1", "Infinityx", "-Infinity1", "--Infinity", "-Inf", "infinity",
          "Infinit", "Na", "[NaN1]", '{"a":-NaN}', "[+Infinity]", "INFINITY", "-nan"]:
    add("invalid token %r" % s, s, opts_list=ALL_OPTS[:1])

# --- Deliberate deviations (CPython accepts, pyjson rejects) ---------------------

add("utf-16 input", '{"a":1}'.encode("utf-16-le"), opts_list=ALL_OPTS[:1], deviation="only UTF-8 input is supported")
add("utf-32 input", '[1]'.encode("utf-32-be"), opts_list=ALL_OPTS[:1], deviation="only UTF-8 input is supported")

with open(OUT, "w", encoding="ascii") as fh:
    json.dump({"python": sys.version.split()[0], "count": len(vectors), "vectors": vectors}, fh, indent=1)
    fh.write("\n")
print("wrote %d vectors to %s" % (len(vectors), OUT))
