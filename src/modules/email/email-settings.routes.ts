import { Type } from '@sinclair/typebox';
import { MessageSchema, withErrors } from '../../http/schemas.js';
import type { App } from '../../http/types.js';
import { type AuthContext, requireEnv } from '../auth/auth.service.js';
import type { EmailSettingsService } from './email-settings.service.js';

const SmtpSettingSchema = Type.Object({
  url: Type.Union([Type.String(), Type.Null()], { description: "this environment's SMTP URL, password masked" }),
  provider: Type.Union([Type.Literal('smtp'), Type.Literal('outbox')]),
  source: Type.Union([Type.Literal('environment'), Type.Literal('server'), Type.Literal('default')]),
  updatedAt: Type.Optional(Type.String()),
});

/** The per-environment SMTP setting that decides whether mail is sent or kept by the mail catcher. */
export function emailSettingsRoutes(app: App, service: EmailSettingsService): void {
  const scope = (auth: AuthContext) => ({ accountId: auth.accountId, envId: requireEnv(auth) });

  const settingTags = ['settings'];
  app.get(
    '/settings/email/smtp',
    { schema: { tags: settingTags, summary: "The environment's SMTP server (masked) and what its mail goes through", response: withErrors({ 200: SmtpSettingSchema }) } },
    (req) => service.getSmtpSetting(scope(req.auth)),
  );

  app.put(
    '/settings/email/smtp',
    {
      schema: {
        tags: settingTags,
        summary: "Send this environment's mail through its own SMTP server (password encrypted at rest)",
        body: Type.Object(
          {
            url: Type.String({ minLength: 8, maxLength: 2000, description: 'smtp://user:pass@host:587 or smtps://user:pass@host:465' }),
            verify: Type.Optional(Type.Boolean({ description: 'connect and authenticate before saving (502 PROVIDER_ERROR when that fails)' })),
          },
          { additionalProperties: false },
        ),
        response: withErrors({ 200: SmtpSettingSchema, 502: Type.Ref('ErrorBody') }),
      },
    },
    (req) => service.putSmtpSetting(scope(req.auth), req.body.url, req.body.verify ?? false),
  );

  app.delete(
    '/settings/email/smtp',
    { schema: { tags: settingTags, summary: "Remove the environment's SMTP server (mail falls back to the server default)", response: withErrors({ 200: MessageSchema }) } },
    async (req) => {
      await service.deleteSmtpSetting(scope(req.auth));
      return { message: 'SMTP setting removed' };
    },
  );
}
