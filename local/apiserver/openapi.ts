/** OpenAPI v2 and v3 documents of the served kinds (filled in by the OpenAPI work). */
import type { ServedType } from './types.js';

/**
 * The document at `pathname` (`/openapi/v2`, `/openapi/v3`, `/openapi/v3/<api|apis/g>/<v>`), or
 * undefined when there is none there.
 */
function openApiDocument(pathname: string, types: readonly ServedType[]): unknown {
  void pathname;
  void types;
  return undefined;
}

export { openApiDocument };
