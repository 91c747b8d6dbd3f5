/** Voice settings of a branch through the Agents API: defaults, replace, validation, and a merge carrying them to main. */
import t from 'tap';
import { client } from './helpers/http.js';
import { platformFor } from './helpers/platform.js';
import { tenant } from './helpers/tenants.js';

t.test('voice settings: default, replace, 400 on bad values, merged from a branch into main', async (t) => {
  const p = await platformFor(t);
  const api = client(p.edge, { 'x-api-key': (await tenant(p)).key });
  const agent = (await api('POST', '/v1/agents', { name: 'Speaker' })).body.agentId;
  const base = `/v1/agents/${agent}/branches`;
  t.same((await api('GET', `${base}/main/voice`)).body, { voice: '', rate: 150 }, 'the defaults');
  const put = await api('PUT', `${base}/main/voice`, { voice: 'en-gb', rate: 170 });
  t.equal(put.status, 200);
  t.same((await api('GET', `${base}/main/voice`)).body, { voice: 'en-gb', rate: 170 });
  for (const bad of [{ voice: 'en gb', rate: 170 }, { voice: 'en', rate: 20 }, { voice: 'en', rate: 170.5 }, { voice: 'en' }, { voice: 'en', rate: 170, extra: 1 }]) {
    const r = await api('PUT', `${base}/main/voice`, bad);
    t.equal(r.status, 400, JSON.stringify(bad));
  }
  const branch = await api('POST', base, { name: 'slower' });
  t.equal(branch.status, 201, branch.text);
  const id = branch.body.id ?? branch.body.branchId;
  t.equal((await api('PUT', `${base}/${id}/voice`, { voice: 'en-us', rate: 120 })).status, 200);
  const merged = await api('POST', `${base}/${id}/merge`);
  t.equal(merged.status, 200, merged.text);
  t.same((await api('GET', `${base}/main/voice`)).body, { voice: 'en-us', rate: 120 }, 'the branch’s voice reached main');
});
