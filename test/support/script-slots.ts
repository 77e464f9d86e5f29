/**
 * A static check that no Lua script can touch two Redis Cluster slots. A cluster refuses a script
 * whose keys hash to different slots (CROSSSLOT), and cannot route a key the script builds itself;
 * on a single Redis both work, so only a cluster would show the bug. Two halves:
 *
 * - the Lua: every key a `redis.call` names comes from KEYS (directly, or through a local set from
 *   KEYS), never from a string built in Lua;
 * - the TypeScript: at every call that runs a script, the keys passed (the first `numberOfKeys`
 *   elements of runScript's `keysAndArgs`) share one hash tag, worked out by following the
 *   expressions back to the `hashTag(...)` calls they contain.
 *
 * It reads the sources as syntax trees (no type checker, so fixtures can be bare strings) and
 * resolves what a reasonable reader would: consts, destructuring, parameters at a followed call,
 * what a local or imported function returns, object and array literals, spreads, templates and
 * `[...].join(sep)`. A script wrapped in a helper (such as the function that
 * defineIdempotentScript returns) is checked at each call of the helper, with that call's
 * arguments. Whatever it cannot follow is reported as a problem, never skipped.
 */
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

// ---------------------------------------------------------------------------------------------
// Sources

/** Parsed sources by path from the repository root, '/'-separated ('shared/sync/streams.ts'). */
type Project = ReadonlyMap<string, ts.SourceFile>;

function parseSources(sources: Readonly<Record<string, string>>): Project {
  return new Map(
    Object.entries(sources).map(([name, text]) => [
      name,
      ts.createSourceFile(name, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS),
    ]),
  );
}

/** Every .ts file under `dirs` of `root`, tests and declaration files left out. */
function loadProject(root: string, dirs: readonly string[]): Project {
  const sources: Record<string, string> = {};
  for (const dir of dirs) {
    for (const entry of readdirSync(path.join(root, dir), { recursive: true, encoding: 'utf8' })) {
      const name = path.posix.join(dir, entry.split(path.sep).join('/'));
      if (!name.endsWith('.ts') || name.endsWith('.test.ts') || name.endsWith('.d.ts')) continue;
      sources[name] = readFileSync(path.join(root, name), 'utf8');
    }
  }
  return parseSources(sources);
}

function location(node: ts.Node): string {
  const file = node.getSourceFile();
  return `${file.fileName}:${file.getLineAndCharacterOfPosition(node.getStart()).line + 1}`;
}

function callsIn(project: Project): ts.CallExpression[] {
  const calls: ts.CallExpression[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isCallExpression(node)) calls.push(node);
    node.forEachChild(visit);
  };
  for (const file of project.values()) visit(file);
  return calls;
}

function firstOf<T, U>(items: Iterable<T>, pick: (item: T) => U | undefined): U | undefined {
  for (const item of items) {
    const found = pick(item);
    if (found !== undefined) return found;
  }
  return undefined;
}

// ---------------------------------------------------------------------------------------------
// Scopes: which declaration a name means where it is used (lexical scope, as the compiler would)

type Fn = ts.FunctionLikeDeclaration;

function isFn(node: ts.Node): node is Fn {
  return (
    ts.isFunctionDeclaration(node) ||
    ts.isFunctionExpression(node) ||
    ts.isArrowFunction(node) ||
    ts.isMethodDeclaration(node) ||
    ts.isConstructorDeclaration(node) ||
    ts.isGetAccessorDeclaration(node) ||
    ts.isSetAccessorDeclaration(node)
  );
}

function enclosingFn(node: ts.Node): Fn | undefined {
  for (let up = node.parent; up !== undefined; up = up.parent) if (isFn(up)) return up;
  return undefined;
}

function encloses(outer: ts.Node, node: ts.Node): boolean {
  for (let up = node.parent; up !== undefined; up = up.parent) if (up === outer) return true;
  return false;
}

/** The variable, parameter, binding element, function or import `id` refers to. */
function declarationOf(id: ts.Identifier): ts.Node | undefined {
  for (let scope = id.parent; scope !== undefined; scope = scope.parent) {
    const found = declaredIn(scope, id.text);
    if (found !== undefined) return found;
  }
  return undefined;
}

function declaredIn(scope: ts.Node, name: string): ts.Node | undefined {
  if (isFn(scope)) return firstOf(scope.parameters, (p) => bindingNamed(p, p.name, name));
  if (
    ts.isSourceFile(scope) ||
    ts.isBlock(scope) ||
    ts.isModuleBlock(scope) ||
    ts.isCaseClause(scope) ||
    ts.isDefaultClause(scope)
  ) {
    return firstOf(scope.statements, (statement) => statementDeclares(statement, name));
  }
  if (ts.isForStatement(scope) || ts.isForOfStatement(scope) || ts.isForInStatement(scope)) {
    const list = scope.initializer;
    if (list === undefined || !ts.isVariableDeclarationList(list)) return undefined;
    return firstOf(list.declarations, (d) => bindingNamed(d, d.name, name));
  }
  if (ts.isCatchClause(scope) && scope.variableDeclaration !== undefined) {
    return bindingNamed(scope.variableDeclaration, scope.variableDeclaration.name, name);
  }
  return undefined;
}

function statementDeclares(statement: ts.Statement, name: string): ts.Node | undefined {
  if (ts.isVariableStatement(statement)) {
    return firstOf(statement.declarationList.declarations, (d) => bindingNamed(d, d.name, name));
  }
  if (
    (ts.isFunctionDeclaration(statement) || ts.isClassDeclaration(statement)) &&
    statement.name?.text === name
  ) {
    return statement;
  }
  if (!ts.isImportDeclaration(statement) || statement.importClause === undefined) return undefined;
  const { name: defaultName, namedBindings } = statement.importClause;
  if (defaultName?.text === name) return statement.importClause;
  if (namedBindings === undefined) return undefined;
  if (ts.isNamespaceImport(namedBindings)) {
    return namedBindings.name.text === name ? namedBindings : undefined;
  }
  return namedBindings.elements.find((element) => element.name.text === name);
}

/** `holder` itself when `binding` is `name`, or the element of a destructuring pattern that is. */
function bindingNamed(holder: ts.Node, binding: ts.BindingName, name: string): ts.Node | undefined {
  if (ts.isIdentifier(binding)) return binding.text === name ? holder : undefined;
  return firstOf(binding.elements, (element) =>
    ts.isOmittedExpression(element) ? undefined : bindingNamed(element, element.name, name),
  );
}

// ---------------------------------------------------------------------------------------------
// Modules: relative imports within the project, through re-exports (shared/redis/index.ts)

function moduleFile(project: Project, from: ts.SourceFile, specifier: string) {
  if (!specifier.startsWith('.')) return undefined;
  const base = path.posix.join(path.posix.dirname(from.fileName), specifier).replace(/\.js$/, '');
  return project.get(`${base}.ts`) ?? project.get(`${base}/index.ts`);
}

function exportedDeclaration(
  project: Project,
  file: ts.SourceFile,
  name: string,
): ts.Node | undefined {
  for (const statement of file.statements) {
    if (!ts.isExportDeclaration(statement) || statement.exportClause === undefined) continue;
    if (!ts.isNamedExports(statement.exportClause)) continue;
    const specifier = statement.exportClause.elements.find((e) => e.name.text === name);
    if (specifier === undefined) continue;
    const local = (specifier.propertyName ?? specifier.name).text;
    const from = statement.moduleSpecifier;
    if (from === undefined) return firstOf(file.statements, (s) => statementDeclares(s, local));
    const target = ts.isStringLiteral(from) ? moduleFile(project, file, from.text) : undefined;
    return target === undefined ? undefined : exportedDeclaration(project, target, local);
  }
  // `export const` / `export function` (any top-level name: close enough for a test).
  return firstOf(file.statements, (s) => statementDeclares(s, name));
}

/** An import's declaration in its module (when the module is in the project), else `decl`. */
function throughImports(project: Project, decl: ts.Node | undefined): ts.Node | undefined {
  let current = decl;
  for (let hop = 0; hop < 10 && current !== undefined && ts.isImportSpecifier(current); hop += 1) {
    const specifier = current.parent.parent.parent.moduleSpecifier;
    if (!ts.isStringLiteral(specifier)) return current;
    const target = moduleFile(project, current.getSourceFile(), specifier.text);
    if (target === undefined) return current;
    current = exportedDeclaration(project, target, (current.propertyName ?? current.name).text);
  }
  return current;
}

/**
 * The name a call's callee is imported under (its own name when not declared at all, as in a
 * fixture without imports); undefined for a local function. shared/redis's functions are known
 * by these names, so fixtures need not include shared/redis.
 */
function importedName(call: ts.CallExpression): string | undefined {
  const callee = call.expression;
  if (!ts.isIdentifier(callee)) return undefined;
  const decl = declarationOf(callee);
  if (decl === undefined) return callee.text;
  return ts.isImportSpecifier(decl) ? (decl.propertyName ?? decl.name).text : undefined;
}

/**
 * What the check reasons about instead of reading the body: runScript and luaScript, and the
 * key builders hashTag and key. (defineIdempotentScript's body is read: it is an ordinary
 * wrapper, and the marker key it adds is one more key to check.)
 */
type Intrinsic = 'runScript' | 'luaScript' | 'hashTag' | 'key';
const intrinsics: ReadonlySet<string> = new Set<Intrinsic>([
  'runScript',
  'luaScript',
  'hashTag',
  'key',
]);

function isCallOf(
  node: ts.Node,
  name: Intrinsic | 'defineIdempotentScript',
): node is ts.CallExpression {
  return ts.isCallExpression(node) && importedName(node) === name;
}

function isIntrinsicCall(node: ts.CallExpression): boolean {
  return intrinsics.has(importedName(node) ?? '');
}

// ---------------------------------------------------------------------------------------------
// Values: following an expression back to what it is made of

/** A call being followed: its arguments are read in `env`, the caller's environment. */
interface Frame {
  readonly call: ts.CallExpression;
  readonly env: Env;
}

/** The followed call of each function the expression is inside: how its parameters resolve. */
type Env = ReadonlyMap<Fn, Frame>;

/** An expression (or a function) with the environment it is read in. */
interface Ref {
  readonly node: ts.Node;
  readonly env: Env;
}

const noEnv: Env = new Map();

/** Lua source as far as it resolves; `holes` are the parts that did not. */
interface LuaText {
  readonly text: string;
  readonly holes: readonly string[];
}

const plain = (text: string): LuaText => ({ text, holes: [] });
const joinTexts = (parts: readonly LuaText[]): LuaText => ({
  text: parts.map((p) => p.text).join(''),
  holes: parts.flatMap((p) => p.holes),
});

/** What a key is made of: the hash tags it contains, and the parts that did not resolve. */
interface KeyTags {
  readonly tags: readonly string[];
  readonly unknown: readonly string[];
}

function returnedExpression(fn: Fn): ts.Node | undefined {
  if (fn.body === undefined) return undefined;
  if (!ts.isBlock(fn.body)) return fn.body;
  const returns: ts.ReturnStatement[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isReturnStatement(node)) returns.push(node);
    else if (!isFn(node)) node.forEachChild(visit);
  };
  fn.body.forEachChild(visit);
  // One return: its value. Several would each need following; none here do.
  return returns.length === 1 ? returns[0]?.expression : undefined;
}

function propertyName(name: ts.PropertyName | undefined): string | undefined {
  if (name === undefined) return undefined;
  return ts.isIdentifier(name) || ts.isStringLiteral(name) || ts.isNumericLiteral(name)
    ? name.text
    : undefined;
}

function isConst(decl: ts.VariableDeclaration): boolean {
  return (ts.getCombinedNodeFlags(decl) & ts.NodeFlags.Const) !== 0;
}

class Resolver {
  /** Functions whose parameters were needed where no followed call supplied them. */
  readonly needs = new Set<Fn>();

  constructor(readonly project: Project) {}

  /** Follows aliases (consts, parameters, members, calls) to what `ref` is made of. */
  resolve(ref: Ref): Ref {
    let current = ref;
    // Bounded: a recursive function would otherwise be followed for ever.
    for (let hop = 0; hop < 200; hop += 1) {
      const next = this.step(current);
      if (next === undefined) return current;
      current = next;
    }
    return current;
  }

  private step({ node, env }: Ref): Ref | undefined {
    if (
      ts.isParenthesizedExpression(node) ||
      ts.isAsExpression(node) ||
      ts.isSatisfiesExpression(node) ||
      ts.isNonNullExpression(node) ||
      ts.isTypeAssertionExpression(node)
    ) {
      return { node: node.expression, env };
    }
    if (ts.isIdentifier(node)) return this.identifier(node, env);
    if (ts.isPropertyAccessExpression(node)) {
      return this.member(this.resolve({ node: node.expression, env }), node.name.text);
    }
    if (ts.isElementAccessExpression(node) && ts.isNumericLiteral(node.argumentExpression)) {
      const list = this.resolve({ node: node.expression, env });
      return this.element(list, Number(node.argumentExpression.text));
    }
    if (ts.isCallExpression(node) && !isIntrinsicCall(node)) return this.result(node, env);
    return undefined;
  }

  private identifier(id: ts.Identifier, env: Env): Ref | undefined {
    const decl = throughImports(this.project, declarationOf(id));
    if (decl === undefined) return undefined;
    if (ts.isVariableDeclaration(decl)) {
      return isConst(decl) && decl.initializer !== undefined
        ? { node: decl.initializer, env }
        : undefined;
    }
    if (ts.isParameter(decl)) return this.argument(decl, env);
    if (ts.isBindingElement(decl)) return this.destructured(decl, env);
    // A function: its value, in the environment it is reached from (which holds its closure's).
    if (ts.isFunctionDeclaration(decl)) return { node: decl, env };
    return undefined;
  }

  private argument(param: ts.ParameterDeclaration, env: Env): Ref | undefined {
    const fn = param.parent;
    if (!isFn(fn)) return undefined;
    const frame = env.get(fn);
    if (frame === undefined) {
      this.needs.add(fn);
      return undefined;
    }
    const arg = frame.call.arguments[fn.parameters.indexOf(param)];
    return arg === undefined || ts.isSpreadElement(arg) ? undefined : { node: arg, env: frame.env };
  }

  /** `a` of `const { a } = value` or `const [, a] = value` (or a destructured parameter). */
  private destructured(element: ts.BindingElement, env: Env): Ref | undefined {
    const pattern = element.parent;
    const holder = pattern.parent;
    let source: Ref | undefined;
    if (ts.isBindingElement(holder)) source = this.destructured(holder, env);
    else if (ts.isParameter(holder)) source = this.argument(holder, env);
    else if (isConst(holder) && holder.initializer !== undefined) {
      source = { node: holder.initializer, env };
    }
    if (source === undefined) return undefined;
    const value = this.resolve(source);
    if (ts.isArrayBindingPattern(pattern)) {
      return this.element(value, pattern.elements.indexOf(element));
    }
    const name = element.propertyName ?? element.name;
    return ts.isIdentifier(name) || ts.isStringLiteral(name)
      ? this.member(value, name.text)
      : undefined;
  }

  /** Property `name` of an object literal; later properties win, as at run time. */
  member(object: Ref, name: string): Ref | undefined {
    if (!ts.isObjectLiteralExpression(object.node)) return undefined;
    const { env } = object;
    for (const property of [...object.node.properties].reverse()) {
      if (ts.isSpreadAssignment(property)) {
        const spread = this.resolve({ node: property.expression, env });
        const found = this.member(spread, name);
        // A spread of something unknown may hold `name`: nothing can be said.
        if (found !== undefined || !ts.isObjectLiteralExpression(spread.node)) return found;
        continue;
      }
      if (propertyName(property.name) !== name) continue;
      if (ts.isPropertyAssignment(property)) return { node: property.initializer, env };
      if (ts.isShorthandPropertyAssignment(property)) return { node: property.name, env };
      return { node: property, env };
    }
    return undefined;
  }

  private element(list: Ref, index: number): Ref | undefined {
    if (!ts.isArrayLiteralExpression(list.node)) return undefined;
    const before = list.node.elements.slice(0, index + 1);
    const element = list.node.elements[index];
    if (element === undefined || before.some((e) => ts.isSpreadElement(e))) return undefined;
    return ts.isOmittedExpression(element) ? undefined : { node: element, env: list.env };
  }

  /** What a call of a local or imported function returns, its parameters bound to the call. */
  private result(call: ts.CallExpression, env: Env): Ref | undefined {
    const callee = this.resolve({ node: call.expression, env });
    if (!isFn(callee.node)) return undefined;
    const returned = returnedExpression(callee.node);
    if (returned === undefined) return undefined;
    return { node: returned, env: new Map(callee.env).set(callee.node, { call, env }) };
  }

  number(ref: Ref): number | undefined {
    const { node, env } = this.resolve(ref);
    if (ts.isNumericLiteral(node)) return Number(node.text);
    if (ts.isBinaryExpression(node)) {
      const left = this.number({ node: node.left, env });
      const right = this.number({ node: node.right, env });
      return arithmetic(node.operatorToken.kind, left, right);
    }
    if (ts.isPropertyAccessExpression(node) && node.name.text === 'length') {
      const list = this.resolve({ node: node.expression, env }).node;
      const known = ts.isArrayLiteralExpression(list) && !list.elements.some(ts.isSpreadElement);
      return known ? list.elements.length : undefined;
    }
    return undefined;
  }

  /** The text of a string expression: literals, templates, `+`, `[...].join(sep)`, numbers. */
  text(ref: Ref): LuaText {
    const { node, env } = this.resolve(ref);
    const value = this.number({ node, env });
    if (value !== undefined) return plain(String(value));
    if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) {
      return plain(node.text);
    }
    if (ts.isTemplateExpression(node)) {
      const spans = node.templateSpans.flatMap((span) => [
        this.text({ node: span.expression, env }),
        plain(span.literal.text),
      ]);
      return joinTexts([plain(node.head.text), ...spans]);
    }
    if (ts.isBinaryExpression(node) && node.operatorToken.kind === ts.SyntaxKind.PlusToken) {
      return joinTexts([this.text({ node: node.left, env }), this.text({ node: node.right, env })]);
    }
    // An identifier stands in for an unknown part, so a key there is not taken for one from KEYS.
    const joined = this.joined(node, env);
    if (joined !== undefined) return joined;
    return { text: ' __unresolved__ ', holes: [render(this.project, { node, env })] };
  }

  private joined(node: ts.Node, env: Env): LuaText | undefined {
    if (!ts.isCallExpression(node) || !ts.isPropertyAccessExpression(node.expression)) {
      return undefined;
    }
    if (node.expression.name.text !== 'join') return undefined;
    const list = this.resolve({ node: node.expression.expression, env });
    if (!ts.isArrayLiteralExpression(list.node)) return undefined;
    if (list.node.elements.some(ts.isSpreadElement)) return undefined;
    const separatorArg = node.arguments[0];
    const separator =
      separatorArg === undefined ? plain(',') : this.text({ node: separatorArg, env });
    const parts = list.node.elements.map((element) => this.text({ node: element, env: list.env }));
    return joinTexts(parts.flatMap((part, i) => (i === 0 ? [part] : [separator, part])));
  }

  /** The first `count` elements of an array expression, through spreads; undefined if unknown. */
  keyRefs(ref: Ref, count: number): Ref[] | undefined {
    const found: Ref[] = [];
    const collect = (from: Ref): boolean => {
      const list = this.resolve(from);
      if (!ts.isArrayLiteralExpression(list.node)) return false;
      for (const element of list.node.elements) {
        // Stop at the keys: what follows (the args) need not resolve.
        if (found.length >= count) return true;
        if (!ts.isSpreadElement(element)) found.push({ node: element, env: list.env });
        else if (!collect({ node: element.expression, env: list.env })) return false;
      }
      return true;
    };
    return collect(ref) && found.length >= count ? found.slice(0, count) : undefined;
  }

  /** The hash tags a key expression contains: `hashTag(x)` calls and literal `{...}` parts. */
  keyTags(ref: Ref): KeyTags {
    const tags: string[] = [];
    const unknown: string[] = [];
    const visit = (from: Ref): void => {
      const { node, env } = this.resolve(from);
      const parts = this.keyParts(node);
      if (parts === undefined) unknown.push(render(this.project, { node, env }));
      else if (isCallOf(node, 'hashTag')) {
        const [arg] = node.arguments;
        if (arg !== undefined) tags.push(render(this.project, { node: arg, env }));
      } else {
        tags.push(...parts.literals.flatMap(literalTags));
        for (const part of parts.expressions) visit({ node: part, env });
      }
    };
    visit(ref);
    return { tags, unknown };
  }

  /** What a key is built from: literal text and sub-expressions; undefined when opaque. */
  private keyParts(
    node: ts.Node,
  ): { literals: string[]; expressions: readonly ts.Expression[] } | undefined {
    if (isCallOf(node, 'hashTag')) return { literals: [], expressions: [] };
    if (isCallOf(node, 'key')) return { literals: [], expressions: node.arguments };
    if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) {
      return { literals: [node.text], expressions: [] };
    }
    if (ts.isNumericLiteral(node)) return { literals: [], expressions: [] };
    if (ts.isTemplateExpression(node)) {
      const literals = [node.head.text, ...node.templateSpans.map((span) => span.literal.text)];
      return { literals, expressions: node.templateSpans.map((span) => span.expression) };
    }
    if (ts.isBinaryExpression(node) && node.operatorToken.kind === ts.SyntaxKind.PlusToken) {
      return { literals: [], expressions: [node.left, node.right] };
    }
    return undefined;
  }
}

function arithmetic(op: ts.SyntaxKind, a?: number, b?: number): number | undefined {
  if (a === undefined || b === undefined) return undefined;
  if (op === ts.SyntaxKind.PlusToken) return a + b;
  if (op === ts.SyntaxKind.MinusToken) return a - b;
  if (op === ts.SyntaxKind.AsteriskToken) return a * b;
  if (op === ts.SyntaxKind.SlashToken) return a / b;
  return undefined;
}

/** A literal `{tag}` in key text, rendered as render() renders a string. */
function literalTags(text: string): string[] {
  const tag = /\{([^}]+)\}/.exec(text)?.[1];
  return tag === undefined ? [] : [`\`${tag}\``];
}

/**
 * A hash tag's argument as comparable text, local aliases resolved: `tag` with
 * `const tag = \`aset:${options.topology}\`` reads `\`aset:${options.topology}\``; what does not
 * resolve further (a parameter no followed call supplies) stays as written.
 */
function render(project: Project, ref: Ref, depth = 0): string {
  const { node, env } = new Resolver(project).resolve(ref);
  const again = (next: ts.Node): string =>
    depth > 20 ? next.getText() : render(project, { node: next, env }, depth + 1);
  if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) {
    return `\`${node.text}\``;
  }
  if (ts.isTemplateExpression(node)) {
    const spans = node.templateSpans.map(
      (span) => `\${${again(span.expression)}}${span.literal.text}`,
    );
    return `\`${node.head.text}${spans.join('')}\``;
  }
  if (ts.isPropertyAccessExpression(node)) return `${again(node.expression)}.${node.name.text}`;
  if (ts.isCallExpression(node)) {
    return `${again(node.expression)}(${node.arguments.map((arg) => again(arg)).join(', ')})`;
  }
  return node.getText().replace(/\s+/g, ' ');
}

// ---------------------------------------------------------------------------------------------
// Lua: every key a command names comes from KEYS

interface Token {
  readonly kind: 'name' | 'string' | 'number' | 'op';
  readonly text: string;
  /** A string's contents. */
  readonly value: string;
  readonly start: number;
  readonly end: number;
}

// Groups: 1 space or comment, 3 string, 5 name, 6 number, 7 operator (longest first).
const luaToken =
  /(\s+|--\[(=*)\[[\s\S]*?\]\2\]|--[^\n]*)|(\[(=*)\[[\s\S]*?\]\4\]|'(?:\\[\s\S]|[^'\\\n])*'|"(?:\\[\s\S]|[^"\\\n])*")|([A-Za-z_]\w*)|(0[xX][\da-fA-F]+|\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+)|(\.\.\.|\.\.|==|~=|<=|>=|::|\/\/|<<|>>|[\s\S])/gy;

function tokenize(lua: string): Token[] {
  const tokens: Token[] = [];
  luaToken.lastIndex = 0;
  for (let match = luaToken.exec(lua); match !== null; match = luaToken.exec(lua)) {
    const [text] = match;
    const token = { text, value: text, start: match.index, end: match.index + text.length };
    if (match[1] !== undefined) continue;
    if (match[3] !== undefined) {
      const quote = text.startsWith('[') ? (match[4]?.length ?? 0) + 2 : 1;
      tokens.push({ ...token, kind: 'string', value: text.slice(quote, text.length - quote) });
    } else if (match[5] !== undefined) tokens.push({ ...token, kind: 'name' });
    else if (match[6] !== undefined) tokens.push({ ...token, kind: 'number' });
    else tokens.push({ ...token, kind: 'op' });
  }
  return tokens;
}

/** Index of the bracket closing the one at `open`, or -1. */
function closing(tokens: readonly Token[], open: number): number {
  let depth = 0;
  for (let i = open; i < tokens.length; i += 1) {
    const text = tokens[i]?.kind === 'op' ? tokens[i]?.text : undefined;
    if (text === '(' || text === '[' || text === '{') depth += 1;
    if (text === ')' || text === ']' || text === '}') depth -= 1;
    if (depth === 0) return i;
  }
  return -1;
}

/** After `KEYS[...]` or `table.remove(KEYS...)` starting at `at`: the index past it, else -1. */
function keysSourceEnd(tokens: readonly Token[], at: number): number {
  const text = (offset: number) => tokens[at + offset]?.text;
  let open = -1;
  if (text(0) === 'KEYS' && text(1) === '[') open = at + 1;
  const remove = text(0) === 'table' && text(1) === '.' && text(2) === 'remove';
  if (remove && text(3) === '(' && text(4) === 'KEYS' && [')', ','].includes(text(5) ?? '')) {
    open = at + 3;
  }
  const close = open < 0 ? -1 : closing(tokens, open);
  return close < 0 ? -1 : close + 1;
}

/** Tokens that would continue an expression (`KEYS[1] .. ':x'` is not a key from KEYS). */
const continuing = new Set('.. + - * / // % ^ == ~= < > <= >= and or [ . : ( {'.split(' '));

function isKeysSourceAt(tokens: readonly Token[], at: number): boolean {
  const end = keysSourceEnd(tokens, at);
  const next = tokens[end];
  return end >= 0 && (next === undefined || !continuing.has(next.text));
}

/** One name's binding: a local, a parameter, a loop variable or an assignment target. */
interface LuaBinding {
  readonly name: string;
  readonly fromKeys: boolean;
}

const statementWords = new Set(['local', 'if', 'for', 'while', 'repeat', 'return', 'do', 'end']);

/** Where each of the first `count` expressions of the list starting at `from` begins. */
function expressionStarts(tokens: readonly Token[], from: number, count: number): number[] {
  const starts = [from];
  let depth = 0;
  for (let i = from; i < tokens.length && starts.length < count; i += 1) {
    const token = tokens[i];
    if (token === undefined || (depth === 0 && statementWords.has(token.text))) break;
    if (token.kind === 'op' && '([{'.includes(token.text)) depth += 1;
    if (token.kind === 'op' && ')]}'.includes(token.text)) depth -= 1;
    if (depth === 0 && token.text === ',') starts.push(i + 1);
  }
  return starts;
}

/** `local a, b = e1, e2`: each name, and whether its value is a key from KEYS. */
function localBindings(tokens: readonly Token[], at: number): LuaBinding[] {
  const names: string[] = [];
  let i = at + 1;
  while (tokens[i]?.kind === 'name' && tokens[i]?.text !== 'function') {
    names.push(tokens[i]?.text ?? '');
    i += tokens[i + 1]?.text === '<' ? 4 : 1; // an attribute: `local x <const>`
    if (tokens[i]?.text !== ',') break;
    i += 1;
  }
  if (tokens[i]?.text !== '=') return names.map((name) => ({ name, fromKeys: false }));
  const starts = expressionStarts(tokens, i + 1, names.length);
  return names.map((name, k) => {
    const start = starts[k];
    return { name, fromKeys: start !== undefined && isKeysSourceAt(tokens, start) };
  });
}

/** Names after `function` (its name and parameters) or `for` (its variables). */
function namesUntil(tokens: readonly Token[], from: number, stop: readonly string[]): string[] {
  const names: string[] = [];
  for (let i = from; i < tokens.length && !stop.includes(tokens[i]?.text ?? ''); i += 1) {
    if (tokens[i]?.kind === 'name') names.push(tokens[i]?.text ?? '');
  }
  return names;
}

/** `a, b = ...` (not `x.a = ...`): the names assigned, each rebinding its name. */
function assignedBefore(tokens: readonly Token[], equals: number): string[] {
  const names: string[] = [];
  let i = equals - 1;
  while (tokens[i]?.kind === 'name') {
    names.push(tokens[i]?.text ?? '');
    if (tokens[i - 1]?.text !== ',') break;
    i -= 2;
  }
  const before = tokens[i - 1]?.text;
  if (before === 'local') return []; // localBindings has it
  if (before === '.' || before === ':') names.pop();
  return names;
}

function luaBindings(tokens: readonly Token[]): LuaBinding[] {
  const other = (name: string): LuaBinding => ({ name, fromKeys: false });
  return tokens.flatMap((token, i) => {
    if (token.kind === 'name' && token.text === 'local') return localBindings(tokens, i);
    if (token.kind === 'name' && token.text === 'function') {
      return namesUntil(tokens, i + 1, [')']).map(other);
    }
    if (token.kind === 'name' && token.text === 'for') {
      return namesUntil(tokens, i + 1, ['=', 'in']).map(other);
    }
    return token.kind === 'op' && token.text === '=' ? assignedBefore(tokens, i).map(other) : [];
  });
}

/** Locals that only ever hold a key from KEYS (any other binding of the name disqualifies it). */
function keyLocals(tokens: readonly Token[]): Set<string> {
  const bindings = luaBindings(tokens);
  const other = new Set(bindings.filter((b) => !b.fromKeys).map((b) => b.name));
  return new Set(bindings.filter((b) => b.fromKeys && !other.has(b.name)).map((b) => b.name));
}

/**
 * Which arguments of each command are keys (1 = the first after the command's name); 'all':
 * every one. Every command the scripts use is here; one that is not is reported, so a new
 * command is looked up (in the Redis command reference) before it passes.
 */
const oneKeyFirst = [
  // Used by the scripts in shared/ (with DEL and XGROUP below).
  'EXPIRE GET HDEL HGET HGETALL HINCRBY HINCRBYFLOAT HMGET HSET HSETNX LINDEX LRANGE LSET LTRIM',
  'PERSIST PEXPIRE RPUSH SADD SET XADD ZADD ZRANGEBYSCORE ZREM ZREMRANGEBYSCORE ZSCORE',
  // Not used yet.
  'INCR INCRBY HLEN HEXISTS LPUSH LPOP RPOP LLEN SREM SISMEMBER SMEMBERS SCARD ZCARD ZINCRBY',
  'ZRANGE ZCOUNT XACK XLEN XRANGE XTRIM XDEL XPENDING XCLAIM XAUTOCLAIM TTL PTTL TYPE',
].flatMap((line) => line.split(' '));

const keyArguments: Readonly<Record<string, readonly number[] | 'all'>> = {
  ...Object.fromEntries(oneKeyFirst.map((command) => [command, [1]])),
  DEL: 'all',
  UNLINK: 'all',
  EXISTS: 'all',
  MGET: 'all',
  XGROUP: [2], // XGROUP CREATE <key> <group> ...
  COPY: [1, 2],
  RENAME: [1, 2],
  SMOVE: [1, 2],
  LMOVE: [1, 2],
  TIME: [],
};

interface LuaCall {
  readonly command: readonly Token[] | undefined;
  readonly args: readonly (readonly Token[])[];
}

/** Every `redis.call(...)` / `redis.pcall(...)`, its arguments split at top-level commas. */
function redisCalls(tokens: readonly Token[]): LuaCall[] | string {
  const calls: LuaCall[] = [];
  for (let i = 0; i < tokens.length; i += 1) {
    const isCall = ['call', 'pcall'].includes(tokens[i + 2]?.text ?? '');
    if (tokens[i]?.text !== 'redis' || tokens[i + 1]?.text !== '.' || !isCall) continue;
    if (tokens[i + 3]?.text !== '(') return `redis.${tokens[i + 2]?.text} is not called directly`;
    const args: Token[][] = [[]];
    const close = closing(tokens, i + 3);
    for (let j = i + 4, depth = 0; j < close; j += 1) {
      const token = tokens[j];
      if (token === undefined) break;
      if (token.kind === 'op' && '([{'.includes(token.text)) depth += 1;
      if (token.kind === 'op' && ')]}'.includes(token.text)) depth -= 1;
      if (depth === 0 && token.text === ',') args.push([]);
      else args.at(-1)?.push(token);
    }
    const [command, ...rest] = args;
    calls.push({ command, args: rest });
  }
  return calls;
}

/** What is wrong with where a Lua script's keys come from; [] when each is from KEYS. */
function luaKeyProblems(lua: string): string[] {
  const tokens = tokenize(lua);
  const calls = redisCalls(tokens);
  if (typeof calls === 'string') return [calls];
  const keys = keyLocals(tokens);
  const source = (part: readonly Token[]) =>
    part.length === 0 ? '(nothing)' : lua.slice(part[0]?.start, part.at(-1)?.end);
  return calls.flatMap(({ command, args }) => {
    const name =
      command?.length === 1 && command[0]?.kind === 'string' ? command[0].value : undefined;
    if (name === undefined) {
      return [`redis.call's command ${source(command ?? [])} is not a literal`];
    }
    const spec = keyArguments[name.toUpperCase()];
    if (spec === undefined) return [`${name}: not in the table of commands' key arguments`];
    const positions = spec === 'all' ? args.map((_, i) => i + 1) : spec;
    return positions.flatMap((position) => {
      const arg = args[position - 1] ?? [];
      const fromKeys =
        (arg.length === 1 && arg[0]?.kind === 'name' && keys.has(arg[0].text)) ||
        keysSourceEnd(arg, 0) === arg.length;
      return fromKeys ? [] : [`${name} key ${source(arg)} is not taken from KEYS`];
    });
  });
}

// ---------------------------------------------------------------------------------------------
// Scripts and the calls that run them

/** A luaScript(...) or defineIdempotentScript(...): its Lua checked on its own. */
interface Definition {
  readonly label: string;
  readonly problems: readonly string[];
}

/** One call that runs a script, with the keys it passes. */
interface Site {
  /** `file:line script`, and the runScript call inside a wrapper it goes through. */
  readonly label: string;
  readonly files: readonly string[];
  readonly keys: readonly string[];
  /** The distinct hash tags of the keys (their `hashTag(...)` arguments). */
  readonly tags: readonly string[];
  readonly problems: readonly string[];
}

interface Analysis {
  readonly definitions: readonly Definition[];
  readonly sites: readonly Site[];
  /** Calls that run a script some other way than runScript (only client.ts may). */
  readonly directEvals: readonly string[];
}

/** A call's callee and its string arguments: `defineIdempotentScript 'aset-responses'`. */
function callLabel(call: ts.CallExpression): string {
  const names = call.arguments.filter(ts.isStringLiteral).map((arg) => `'${arg.text}'`);
  return [call.expression.getText(), ...names].join(' ');
}

/** The const a luaScript(...) is kept in, or the factory call that made it. */
function scriptName(script: Ref): string {
  const factory = [...script.env.keys()].find((fn) => encloses(fn, script.node));
  const frame = factory === undefined ? undefined : script.env.get(factory);
  if (frame !== undefined) return callLabel(frame.call);
  const holder = script.node.parent;
  return ts.isVariableDeclaration(holder) && ts.isIdentifier(holder.name)
    ? holder.name.text
    : 'luaScript(...)';
}

function luaProblems(lua: LuaText, deferred: boolean): string[] {
  const holes =
    lua.holes.length === 0 || deferred
      ? []
      : [`Lua text does not resolve: ${lua.holes.join(', ')}`];
  return [...holes, ...luaKeyProblems(lua.text)];
}

/** The Lua a definition holds: luaScript's second argument, defineIdempotentScript's spec.lua. */
function definedLua(resolver: Resolver, call: ts.CallExpression): Ref | undefined {
  if (importedName(call) !== 'defineIdempotentScript') {
    const lua = call.arguments[1];
    return lua === undefined ? undefined : { node: lua, env: noEnv };
  }
  const spec = call.arguments[2];
  if (spec === undefined) return undefined;
  return resolver.member(resolver.resolve({ node: spec, env: noEnv }), 'lua');
}

function definitionOf(project: Project, call: ts.CallExpression): Definition {
  const resolver = new Resolver(project);
  const idempotent = isCallOf(call, 'defineIdempotentScript');
  const name = idempotent ? callLabel(call) : scriptName({ node: call, env: noEnv });
  const where = `${location(call)}: script ${name}`;
  const luaRef = definedLua(resolver, call);
  if (luaRef === undefined) {
    return { label: `${location(call)} ${name}`, problems: [`${where} has no Lua to check`] };
  }
  const lua = resolver.text(luaRef);
  // Parts that the callers of its enclosing function supply (defineIdempotentScript's spec.lua)
  // resolve only at each call site, where the whole text is checked again.
  const deferred = lua.holes.length > 0 && [...resolver.needs].some((fn) => encloses(fn, call));
  const note = deferred ? ` (with ${lua.holes.join(', ')} from each call site)` : '';
  return {
    label: `${location(call)} ${name}${note}`,
    problems: luaProblems(lua, deferred).map((p) => `${where} ${p}`),
  };
}

interface RunAnalysis {
  readonly site: Site;
  /** Unresolved parts that a followed call of an enclosing function might complete. */
  readonly incomplete: boolean;
  readonly needs: ReadonlySet<Fn>;
}

interface ResolvedScript {
  readonly name: string;
  readonly count: number;
  readonly lua: LuaText;
}

function resolveScript(resolver: Resolver, arg: ts.Node, env: Env): ResolvedScript | string {
  const script = resolver.resolve({ node: arg, env });
  if (!isCallOf(script.node, 'luaScript')) return `cannot resolve script ${arg.getText()}`;
  const [countArg, luaArg] = script.node.arguments;
  const name = scriptName(script);
  const count = countArg && resolver.number({ node: countArg, env: script.env });
  if (count === undefined) return `cannot resolve the number of keys of ${name}`;
  const lua = luaArg === undefined ? plain('') : resolver.text({ node: luaArg, env: script.env });
  return { name, count, lua };
}

interface KeyReport extends KeyTags {
  readonly text: string;
  readonly needs: ReadonlySet<Fn>;
}

function keyReport(project: Project, key: Ref): KeyReport {
  // A resolver of its own: what this key alone needs, when it is what stays unresolved.
  const resolver = new Resolver(project);
  const tags = resolver.keyTags(key);
  return { ...tags, text: key.node.getText().replace(/\s+/g, ' '), needs: resolver.needs };
}

function keyProblems(script: ResolvedScript, keys: readonly KeyReport[]): string[] {
  const tags = [...new Set(keys.flatMap((k) => k.tags))];
  const problems: string[] = [];
  if (tags.length > 1) {
    problems.push(`keys ${keys.map((k) => k.text).join(', ')} use tags ${tags.join(', ')}`);
  }
  // One key is one slot, tagged or not; two or more share a slot only through a tag.
  if (script.count < 2) return problems;
  for (const key of keys.filter((k) => k.tags.length === 0)) {
    const unknown = key.unknown.length > 0 ? ` (not resolved: ${key.unknown.join(', ')})` : '';
    problems.push(`key ${key.text} has no hash tag${unknown}`);
  }
  return problems;
}

function analyseRun(
  project: Project,
  run: ts.CallExpression,
  env: Env,
  at: ts.CallExpression,
): RunAnalysis {
  const resolver = new Resolver(project);
  const where = location(at);
  const via = at === run ? '' : ` (via ${location(run)})`;
  const files = [...new Set([at.getSourceFile().fileName, run.getSourceFile().fileName])];
  const [, scriptArg, keysArg] = run.arguments;
  const failed = (problem: string, name = 'script'): RunAnalysis => ({
    site: {
      label: `${where} ${name}${via}`,
      files,
      keys: [],
      tags: [],
      problems: [`${where}: ${problem}`],
    },
    incomplete: true,
    needs: resolver.needs,
  });
  if (scriptArg === undefined || keysArg === undefined) {
    return failed('runScript without script or keys');
  }
  const script = resolveScript(resolver, scriptArg, env);
  if (typeof script === 'string') return failed(script);
  const refs = resolver.keyRefs({ node: keysArg, env }, script.count);
  if (refs === undefined) {
    const problem = `cannot resolve its ${script.count} keys from ${keysArg.getText()}`;
    return failed(`script ${script.name} ${problem}`, script.name);
  }
  const keys = refs.map((ref) => keyReport(project, ref));
  const open = keys.filter((k) => k.tags.length === 0 && k.unknown.length > 0);
  const problems = [...luaProblems(script.lua, false), ...keyProblems(script, keys)];
  return {
    site: {
      label: `${where} ${script.name}${via}`,
      files,
      keys: keys.map((k) => k.text),
      tags: [...new Set(keys.flatMap((k) => k.tags))],
      problems: problems.map((p) => `${where}: script ${script.name} ${p}`),
    },
    incomplete: script.lua.holes.length > 0 || open.length > 0,
    needs: new Set([...resolver.needs, ...open.flatMap((k) => [...k.needs])]),
  };
}

/** A call of a wrapper function, with the environment its body is read in. */
interface Caller {
  readonly call: ts.CallExpression;
  readonly env: Env;
}

interface Callers {
  readonly calls: readonly Caller[];
  readonly escapes: readonly string[];
}

/** A const or function declaration a wrapper is reached through, with its closure's frames. */
interface Handle {
  readonly declaration: ts.VariableDeclaration | ts.FunctionDeclaration;
  readonly env: Env;
}

function isValueReference(id: ts.Identifier): boolean {
  const parent = id.parent;
  if (ts.isShorthandPropertyAssignment(parent) || ts.isExportSpecifier(parent)) return true;
  if (ts.isBindingElement(parent) && parent.propertyName === id) return false;
  return !('name' in parent && parent.name === id);
}

/** Every call through `handle`; any other use (passed on, exported) is an escape. */
function callsThrough(fn: Fn, handle: Handle): Callers {
  const { declaration } = handle;
  const name = declaration.name;
  if (name === undefined || !ts.isIdentifier(name)) {
    return { calls: [], escapes: [`${location(fn)}: a wrapper without a name`] };
  }
  const exported = (ts.getCombinedModifierFlags(declaration) & ts.ModifierFlags.Export) !== 0;
  const escapes = exported
    ? [`${location(name)}: ${name.text} is exported; its callers elsewhere are not followed`]
    : [];
  const calls: Caller[] = [];
  const visit = (node: ts.Node): void => {
    node.forEachChild(visit);
    if (!ts.isIdentifier(node) || node === name || node.text !== name.text) return;
    if (!isValueReference(node) || declarationOf(node) !== declaration) return;
    const call = node.parent;
    if (ts.isCallExpression(call) && call.expression === node) {
      calls.push({ call, env: new Map(handle.env).set(fn, { call, env: noEnv }) });
    } else escapes.push(`${location(node)}: ${name.text} is used other than called; not followed`);
  };
  visit(declaration.getSourceFile());
  return { calls, escapes };
}

/** Where `fn` is reachable from: its declaration, its const, or the consts its factory fills. */
function handlesOf(
  project: Project,
  calls: readonly ts.CallExpression[],
  fn: Fn,
): { handles: Handle[]; escapes: string[] } {
  if (ts.isFunctionDeclaration(fn)) {
    return { handles: [{ declaration: fn, env: noEnv }], escapes: [] };
  }
  if (ts.isVariableDeclaration(fn.parent) && fn.parent.initializer === fn) {
    return { handles: [{ declaration: fn.parent, env: noEnv }], escapes: [] };
  }
  const factory = enclosingFn(fn);
  if (factory === undefined || returnedExpression(factory) !== fn) {
    return {
      handles: [],
      escapes: [`${location(fn)}: cannot tell where this function is called from`],
    };
  }
  const handles: Handle[] = [];
  const escapes: string[] = [];
  for (const call of calls) {
    if (!ts.isIdentifier(call.expression)) continue;
    const decl = throughImports(project, declarationOf(call.expression));
    const isFactory =
      decl === factory ||
      (decl !== undefined && ts.isVariableDeclaration(decl) && decl.initializer === factory);
    if (!isFactory) continue;
    const holder = call.parent;
    if (ts.isVariableDeclaration(holder) && holder.initializer === call && isConst(holder)) {
      handles.push({ declaration: holder, env: new Map([[factory, { call, env: noEnv }]]) });
    } else {
      const factoryName = call.expression.text;
      escapes.push(`${location(call)}: what ${factoryName} returns is not kept in a const`);
    }
  }
  return { handles, escapes };
}

function callersOf(project: Project, calls: readonly ts.CallExpression[], fn: Fn): Callers {
  const { handles, escapes } = handlesOf(project, calls, fn);
  const found = handles.map((handle) => callsThrough(fn, handle));
  return {
    calls: found.flatMap((f) => f.calls),
    escapes: [...escapes, ...found.flatMap((f) => f.escapes)],
  };
}

/**
 * The sites of one runScript call: itself when it resolves where it stands; else, when what is
 * missing is a parameter of the function it sits in (a wrapper), each call of that function.
 */
function sitesOf(
  project: Project,
  calls: readonly ts.CallExpression[],
  run: ts.CallExpression,
): Site[] {
  const here = analyseRun(project, run, noEnv, run);
  const wrapper = enclosingFn(run);
  const fromCaller = [...here.needs].some(
    (fn) => fn === wrapper || (wrapper !== undefined && encloses(fn, wrapper)),
  );
  if (!here.incomplete || wrapper === undefined || !fromCaller) return [here.site];
  const callers = callersOf(project, calls, wrapper);
  if (callers.calls.length === 0 && callers.escapes.length === 0) return [here.site];
  const escaped = callers.escapes.map((escape) => ({
    ...here.site,
    problems: [...here.site.problems, escape],
  }));
  return [
    ...callers.calls.map(({ call, env }) => analyseRun(project, run, env, call).site),
    ...escaped,
  ];
}

const evalMethod = /^(eval|evalsha|fcall|script)(_?ro)?(Buffer)?$|^defineCommand$/i;
const scriptCommand = /^(eval|evalsha|eval_ro|evalsha_ro|fcall|fcall_ro|script)$/i;
const commandSenders = new Set(['call', 'callBuffer', 'sendCommand', 'send_command']);
/** Called as `redis.runScript(...)` (a namespace import), a script would slip past the check. */
const followedByName = new Set(['runScript', 'luaScript', 'defineIdempotentScript']);

/** Calls that send EVAL/EVALSHA (or define a command) other than through runScript by name. */
function directEvalsIn(calls: readonly ts.CallExpression[], allowed: string): string[] {
  return calls.flatMap((call) => {
    const callee = call.expression;
    if (call.getSourceFile().fileName === allowed || !ts.isPropertyAccessExpression(callee)) {
      return [];
    }
    const method = callee.name.text;
    if (evalMethod.test(method)) {
      return [`${location(call)}: .${method}(...) runs a script without runScript`];
    }
    if (followedByName.has(method)) {
      return [`${location(call)}: .${method}(...): the check follows calls by imported name only`];
    }
    const [first] = call.arguments;
    if (!commandSenders.has(method) || first === undefined || !ts.isStringLiteral(first)) return [];
    return scriptCommand.test(first.text)
      ? [`${location(call)}: .${method}('${first.text}', ...) runs a script without runScript`]
      : [];
  });
}

function analyse(project: Project): Analysis {
  const calls = callsIn(project);
  const defined = calls.filter(
    (c) => isCallOf(c, 'luaScript') || isCallOf(c, 'defineIdempotentScript'),
  );
  return {
    definitions: defined.map((call) => definitionOf(project, call)),
    sites: calls
      .filter((c) => isCallOf(c, 'runScript'))
      .flatMap((run) => sitesOf(project, calls, run)),
    directEvals: directEvalsIn(calls, 'shared/redis/client.ts'),
  };
}

export { analyse, loadProject, parseSources, luaKeyProblems };
export type { Analysis, Definition, Project, Site };
