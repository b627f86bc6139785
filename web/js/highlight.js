// Syntax highlighting with highlight.js 11.12.0 (web/vendor/highlight, pinned),
// the common languages only. Output goes in through the Trusted Types policy:
// highlight.js escapes the code it is given and adds only <span class="hljs-*">.
import hljs from '/assets/vendor/highlight/core.min.js';
import bash from '/assets/vendor/highlight/languages/bash.min.js';
import c from '/assets/vendor/highlight/languages/c.min.js';
import cpp from '/assets/vendor/highlight/languages/cpp.min.js';
import css from '/assets/vendor/highlight/languages/css.min.js';
import diff from '/assets/vendor/highlight/languages/diff.min.js';
import dockerfile from '/assets/vendor/highlight/languages/dockerfile.min.js';
import go from '/assets/vendor/highlight/languages/go.min.js';
import ini from '/assets/vendor/highlight/languages/ini.min.js';
import java from '/assets/vendor/highlight/languages/java.min.js';
import javascript from '/assets/vendor/highlight/languages/javascript.min.js';
import json from '/assets/vendor/highlight/languages/json.min.js';
import markdown from '/assets/vendor/highlight/languages/markdown.min.js';
import plaintext from '/assets/vendor/highlight/languages/plaintext.min.js';
import python from '/assets/vendor/highlight/languages/python.min.js';
import rust from '/assets/vendor/highlight/languages/rust.min.js';
import shell from '/assets/vendor/highlight/languages/shell.min.js';
import sql from '/assets/vendor/highlight/languages/sql.min.js';
import typescript from '/assets/vendor/highlight/languages/typescript.min.js';
import xml from '/assets/vendor/highlight/languages/xml.min.js';
import yaml from '/assets/vendor/highlight/languages/yaml.min.js';
import { setTrustedHTML } from './html.js';

const langs = { bash, c, cpp, css, diff, dockerfile, go, ini, java, javascript, json, markdown, plaintext, python, rust, shell, sql, typescript, xml, yaml };
for (const [name, def] of Object.entries(langs)) hljs.registerLanguage(name, def);
hljs.registerAliases(['sh', 'zsh', 'console'], { languageName: 'bash' });
hljs.registerAliases(['toml'], { languageName: 'ini' });
hljs.registerAliases(['html', 'svg'], { languageName: 'xml' });
hljs.registerAliases(['text', 'txt'], { languageName: 'plaintext' });

const MAX_CODE = 100_000; // larger blocks stay plain: highlighting them would stall the page

// The language named by a class="language-x" (or a file name's extension).
export function languageOf(name) {
  if (!name) return null;
  const n = String(name).toLowerCase();
  if (hljs.getLanguage(n)) return n;
  const ext = n.includes('.') ? n.split('.').pop() : n;
  const byExt = { py: 'python', js: 'javascript', mjs: 'javascript', ts: 'typescript', yml: 'yaml', md: 'markdown', h: 'c', hpp: 'cpp', cc: 'cpp', rs: 'rust', htm: 'xml', csv: 'plaintext', log: 'plaintext', cfg: 'ini', conf: 'ini' };
  const l = byExt[ext] || ext;
  return hljs.getLanguage(l) ? l : null;
}

// Highlights a <code> element in place; returns the language used or null.
export function highlightCode(codeEl, lang) {
  const text = codeEl.textContent;
  if (text.length > MAX_CODE) return null;
  lang = languageOf(lang);
  if (!lang) return null;
  const res = hljs.highlight(text, { language: lang, ignoreIllegals: true });
  setTrustedHTML(codeEl, res.value);
  codeEl.classList.add('hljs');
  return lang;
}
