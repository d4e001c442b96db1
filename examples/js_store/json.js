'use strict';
// JSON that keeps what a Python caller sent: integers stay integers (BigInt past
// 2**53), a float stays a float even when it is 1.0 (JSON.parse cannot tell 1 from
// 1.0), and results may hold BigInt. Why: the protocol sends the caller's values as
// they are, and a float address must be refused, not read as an integer.

class PyFloat {
  constructor(v) { this.v = v; }
}

function parse(text) {
  let i = 0;
  const n = text.length;
  const ws = () => { while (i < n && ' \t\r\n'.includes(text[i])) i++; };
  const fail = (what) => { throw new SyntaxError(`bad JSON at ${i}: ${what}`); };
  function str() {
    i++; // opening quote
    let out = '';
    for (;;) {
      let j = i;
      while (j < n) { const c = text.charCodeAt(j); if (c === 34 || c === 92) break; j++; }
      if (j >= n) fail('unterminated string');
      out += text.slice(i, j);
      i = j;
      if (text[i] === '"') { i++; return out; }
      const e = text[i + 1];
      i += 2;
      if (e === 'u') { out += String.fromCharCode(parseInt(text.slice(i, i + 4), 16)); i += 4; }
      else if (e in ESC) out += ESC[e];
      else fail('bad escape');
    }
  }
  function num() {
    const m = /^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/.exec(text.slice(i, i + 400));
    if (!m) fail('bad number');
    i += m[0].length;
    if (m[2] === undefined && m[3] === undefined) {
      const b = BigInt(m[0]);
      return (b >= BigInt(Number.MIN_SAFE_INTEGER) && b <= BigInt(Number.MAX_SAFE_INTEGER)) ? Number(b) : b;
    }
    return new PyFloat(Number(m[0]));
  }
  function value() {
    ws();
    const c = text[i];
    if (c === '{') {
      i++; const o = {}; ws();
      if (text[i] === '}') { i++; return o; }
      for (;;) {
        ws(); if (text[i] !== '"') fail('key');
        const k = str(); ws(); if (text[i] !== ':') fail(':'); i++;
        o[k] = value(); ws();
        if (text[i] === ',') { i++; continue; }
        if (text[i] === '}') { i++; return o; }
        fail('object');
      }
    }
    if (c === '[') {
      i++; const a = []; ws();
      if (text[i] === ']') { i++; return a; }
      for (;;) {
        a.push(value()); ws();
        if (text[i] === ',') { i++; continue; }
        if (text[i] === ']') { i++; return a; }
        fail('array');
      }
    }
    if (c === '"') return str();
    if (text.startsWith('true', i)) { i += 4; return true; }
    if (text.startsWith('false', i)) { i += 5; return false; }
    if (text.startsWith('null', i)) { i += 4; return null; }
    if (text.startsWith('NaN', i) || text.startsWith('Infinity', i) || text.startsWith('-Infinity', i)) {
      const w = text.startsWith('NaN', i) ? 'NaN' : (text[i] === '-' ? '-Infinity' : 'Infinity');
      i += w.length; return new PyFloat(Number(w));
    }
    return num();
  }
  const v = value();
  ws();
  if (i !== n) fail('trailing data');
  return v;
}
const ESC = { '"': '"', '\\': '\\', '/': '/', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' };

function dump(v) {
  if (v === null || v === undefined) return 'null';
  if (typeof v === 'bigint') return v.toString();
  if (typeof v === 'number' || typeof v === 'boolean' || typeof v === 'string') return JSON.stringify(v);
  if (Array.isArray(v)) return '[' + v.map(dump).join(',') + ']';
  return '{' + Object.keys(v).map((k) => JSON.stringify(k) + ':' + dump(v[k])).join(',') + '}';
}

module.exports = { parse, dump, PyFloat };
