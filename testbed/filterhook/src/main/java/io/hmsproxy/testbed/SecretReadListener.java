package io.hmsproxy.testbed;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hive.metastore.MetaStorePreEventListener;
import org.apache.hadoop.hive.metastore.api.MetaException;
import org.apache.hadoop.hive.metastore.api.NoSuchObjectException;
import org.apache.hadoop.hive.metastore.api.Table;
import org.apache.hadoop.hive.metastore.events.PreEventContext;
import org.apache.hadoop.hive.metastore.events.PreReadTableEvent;

/**
 * hive.metastore.pre.event.listeners: the server-side half of the rule.
 * HMS 3.1 fires a read-table event on get_table and on partition reads;
 * for a secret_* table and a caller other than admin the call fails as if
 * the table did not exist, as an authorizer's does.
 */
public class SecretReadListener extends MetaStorePreEventListener {
  public SecretReadListener(Configuration conf) {
    super(conf);
  }

  @Override
  public void onEvent(PreEventContext ctx) throws MetaException, NoSuchObjectException {
    if (ctx.getEventType() != PreEventContext.PreEventType.READ_TABLE) {
      return;
    }
    Table t = ((PreReadTableEvent) ctx).getTable();
    if (t != null && Secret.hidden(t.getTableName())) {
      throw new NoSuchObjectException("hive." + t.getDbName() + "." + t.getTableName() + " table not found");
    }
  }
}
